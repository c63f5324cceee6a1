"""Debug outputs drawn over the datapoint's input image: the maps a gallery tile overlays (Grad-CAM, patch
attention, a feature map's energy, a segmentation debugger's errors, predicted or label mask, a captured mask), and
the small pictures themselves.

A map is drawn as the Datapoint tab draws Grad-CAM: stretched over the image, in its colour scale, at 45 %
opacity (``pictures.composite``); a mask (values 0 and 1 only) and a segmentation's errors (false positives, false
negatives) are drawn by ``marks.py``: a tint with an edge and a halo that stand out from the image; the prompt points
are ringed. Pictures are PNG bytes no larger than the side asked for (at least ``marks.MARK_PX`` where they carry
marks), so a gallery of a hundred tiles costs a few hundred kB to a few MB.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import PIL.Image
import plotly.graph_objects as go

from debuggers import outputs as kinds
from debuggers.outputs import IGNORED
from runners.eval_viewer.figures.attention import patch_attention
from runners.eval_viewer.figures.base import display_image
from runners.eval_viewer.figures.marks import FALSE_NEGATIVE, FALSE_POSITIVE, Layer, marked
from runners.eval_viewer.figures.masks import error_layers
from runners.eval_viewer.figures.pictures import composite

OPACITY = 0.45  # as Grad-CAM over the image in the Datapoint tab
HEAT_SCALE = "Jet"
MAP, MASK, ERRORS = "map", "mask", "errors"  # what an overlay's values are
ERROR_CODES = {1: FALSE_POSITIVE, 2: FALSE_NEGATIVE}  # an errors overlay's values: 0 right, 1 and 2 these
ERRORS_NAME = " › errors"  # ends the name of a segmentation debugger's errors overlay (no captured state's name)


@dataclass(frozen=True)
class Overlay:
    """What to draw over an image: its values (h, w), their colour range, and what they are: a map's values
    (``MAP``), a 0/1 mask (``MASK``), or ``ERROR_CODES`` (``ERRORS``)."""

    name: str
    values: np.ndarray
    low: float = 0.0
    high: float = 1.0
    kind: str = MAP

    def layers(self) -> list[Layer]:
        """The masks ``marks.marked`` draws of a mask or errors overlay (none of a map)."""
        if self.kind == MASK:
            return [Layer(self.values == 1.0)]
        if self.kind == ERRORS:
            return [Layer(self.values == code, colour) for code, colour in ERROR_CODES.items()]
        return []


def overlay_choices(outputs: Mapping[str, Any]) -> list[str]:
    """The names of the overlays a datapoint's outputs hold (``{debugger: output}``): a debugger's name, or
    ``debugger › component.state`` for each map-shaped captured state."""
    return [overlay.name for overlay in _overlays(outputs)]


def default_overlay(names: list[str]) -> Optional[str]:
    """The overlay a gallery shows first: a segmentation debugger's errors (where the model went wrong, as a
    segmentation gallery shows predictions), else none."""
    return next((name for name in names if name.endswith(ERRORS_NAME)), None)


def find_overlay(outputs: Mapping[str, Any], name: Any) -> Optional[Overlay]:
    """The overlay called ``name`` among the datapoint's outputs; None when it has none by that name. The name is
    only compared with the names the outputs give (never parsed), so any text is safe to pass."""
    return next((overlay for overlay in _overlays(outputs) if overlay.name == name), None)


def _overlays(outputs: Mapping[str, Any]) -> Iterator[Overlay]:
    for name, output in outputs.items():
        if not isinstance(output, dict):
            continue
        kind = output.get("kind")
        if kind == kinds.KIND_CAPTURED_STATES:
            for component, states in _items(output.get("states")):
                for state, record in _items(states):
                    values = _map_of(record.get("data") if isinstance(record, dict) else None)
                    if values is not None:
                        yield _scaled(f"{name} › {component}.{state}", values)
            continue
        if kind == kinds.KIND_MASK:
            errors = _errors_map(output.get("label_mask"), output.get("predicted_mask"))
            if errors is not None:
                yield Overlay(f"{name}{ERRORS_NAME}", errors, kind=ERRORS)
            for field, role in (("predicted_mask", "predicted"), ("label_mask", "label")):
                values = _mask_map(output.get(field))
                if values is not None:
                    yield _scaled(f"{name} › {role} mask", values)
            continue
        values = _output_map(kind, output)
        if values is not None:
            yield Overlay(name, values) if kind == kinds.KIND_CAM else _scaled(name, values)


def _items(mapping: Any) -> list[tuple[Any, Any]]:
    """A dict's items; nothing for anything else (a crafted page's states may be anything)."""
    return list(mapping.items()) if isinstance(mapping, dict) else []


def _output_map(kind: Any, output: dict[str, Any]) -> Optional[np.ndarray]:
    """The (h, w) map an output of a ready-made kind draws over the image, if any."""
    try:
        if kind == kinds.KIND_CAM:
            return _map_of(output.get("cam"))
        if kind == kinds.KIND_ATTENTION:
            attention = np.asarray(output.get("attention"), dtype=np.float64)
            found = patch_attention(attention, output.get("grid")) if attention.ndim >= 2 else None
            return None if found is None else found[0]
        if kind == kinds.KIND_FEATURE_MAP:
            return _map_of(output.get("feature_map"))
        if kind == kinds.KIND_LAYER_OUTPUT:
            return _map_of(output.get("output"))
    except (TypeError, ValueError, IndexError, KeyError):  # an odd output (a crafted page) offers no overlay
        return None
    return None


def _map_of(data: Any) -> Optional[np.ndarray]:
    """A numeric (h, w) array, or the channel mean of a (c, h, w) one; None for anything else."""
    if not isinstance(data, np.ndarray) or data.dtype.kind not in "biuf" or data.size == 0:
        return None
    values = data.astype(np.float64)
    if values.ndim == 3:
        values = np.nanmean(values, axis=0) if np.isfinite(values).any() else values[0]
    return values if values.ndim == 2 and min(values.shape) >= 2 else None


def _mask_map(data: Any) -> Optional[np.ndarray]:
    """A segmentation debugger's (S, H, W) masks as one map: 0/1 masks united (any prompt's), class-index masks by
    their first, ``IGNORED`` pixels without a value."""
    if not isinstance(data, np.ndarray) or data.dtype.kind not in "biu" or data.ndim not in (2, 3) or not data.size:
        return None
    values = data.astype(np.float64)
    values[data == IGNORED] = np.nan
    if values.ndim == 3:
        binary = np.isin(values[np.isfinite(values)], (0.0, 1.0)).all()
        values = np.nanmax(values, axis=0) if binary and np.isfinite(values).any() else values[0]
    return values if min(values.shape) >= 2 else None


def _errors_map(label: Any, predicted: Any) -> Optional[np.ndarray]:
    """A segmentation debugger's false positives (1) and false negatives (2) of any prompt's (or frame's) mask, 0
    elsewhere, as ``masks.error_layers`` finds them; None for masks of another shape or kind."""
    if not all(isinstance(m, np.ndarray) and m.dtype.kind in "biu" and m.ndim in (2, 3) and m.size
               for m in (label, predicted)) or label.shape != predicted.shape or min(label.shape[-2:]) < 2:
        return None
    layers = error_layers(label.reshape(-1, *label.shape[-2:]), predicted.reshape(-1, *predicted.shape[-2:]))
    return np.where(layers["false positive"].any(axis=0), 1.0, np.where(layers["false negative"].any(axis=0), 2.0,
                                                                        0.0))


def _scaled(name: str, values: np.ndarray) -> Overlay:
    """A map over its own range; one holding only 0 and 1 is a mask."""
    finite = values[np.isfinite(values)]
    if finite.size and np.isin(finite, (0.0, 1.0)).all():
        return Overlay(name, values, kind=MASK)
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    return Overlay(name, values, low, high)


def picture_png(image: Optional[np.ndarray], overlay: Optional[Overlay], max_side: int,
                points: Optional[np.ndarray] = None) -> bytes:
    """``image`` ((H, W, 3) or (H, W) in [0, 1], as ``values.first_image`` gives it) shrunk so no side exceeds
    ``max_side`` (area average; a smaller one is kept as it is, the page scales it up pixelated), with ``overlay``
    stretched over it and the prompt ``points`` ((x, y) in the image's pixels) ringed, as PNG bytes; the overlay
    alone where there is no image."""
    picture = None if image is None else _shrunk(display_image(image), max_side)
    layers = overlay.layers() if overlay is not None else []
    if overlay is not None and not layers:
        picture = _shrunk(composite(picture, _heatmap(overlay, picture))[..., :3], max_side)
    elif picture is None and layers:
        picture = np.full((*overlay.values.shape, 3), 128, dtype=np.uint8)
    if picture is None:
        raise ValueError("nothing to draw: no image and no overlay")
    if layers or points is not None:
        picture = marked(picture, layers, points, None if image is None else image.shape[:2])
    buffer = io.BytesIO()
    PIL.Image.fromarray(np.ascontiguousarray(picture)).save(buffer, format="PNG")
    return buffer.getvalue()


def _shrunk(pixels: np.ndarray, max_side: int) -> np.ndarray:
    if max(pixels.shape[:2]) <= max_side:
        return pixels
    image = PIL.Image.fromarray(np.ascontiguousarray(pixels))
    scale = max_side / max(image.size)
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return np.asarray(image.resize(size, PIL.Image.Resampling.BOX))


def _heatmap(overlay: Overlay, picture: Optional[np.ndarray]) -> go.Heatmap:
    values = overlay.values
    height, width = picture.shape[:2] if picture is not None else values.shape
    stretch = {"x0": (width / values.shape[1] - 1) / 2, "dx": width / values.shape[1],
               "y0": (height / values.shape[0] - 1) / 2, "dy": height / values.shape[0]}
    return go.Heatmap(z=values, colorscale=HEAT_SCALE, zmin=overlay.low, zmax=overlay.high, opacity=OPACITY, **stretch)
