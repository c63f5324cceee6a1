"""Debug outputs drawn over the datapoint's input image: the maps a gallery tile overlays (Grad-CAM, patch
attention, a feature map's energy, a segmentation debugger's predicted or label mask, a captured mask), and the
small pictures themselves.

A map is drawn as the Datapoint tab draws Grad-CAM: stretched over the image, in its colour scale, at 45 %
opacity (``pictures.composite``); a mask (values 0 and 1 only) is a flat tint where it is 1. Pictures are
PNG bytes no larger than the side asked for, so a gallery of a hundred tiles costs a few hundred kB.
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
from debuggers.mask_debugger import IGNORED
from runners.eval_viewer.figures.attention import patch_attention
from runners.eval_viewer.figures.base import display_image
from runners.eval_viewer.figures.pictures import composite

OPACITY = 0.45  # as Grad-CAM over the image in the Datapoint tab
MASK_OPACITY = 0.5
MASK_COLOUR = "#ff00ff"  # stands out on natural images and on the synthetic shapes alike
HEAT_SCALE = "Jet"


@dataclass(frozen=True)
class Overlay:
    """A map to draw over an image: its values (h, w), colour range, and whether it is a mask."""

    name: str
    values: np.ndarray
    low: float = 0.0
    high: float = 1.0
    mask: bool = False


def overlay_choices(outputs: Mapping[str, Any]) -> list[str]:
    """The names of the overlays a datapoint's outputs hold (``{debugger: output}``): a debugger's name, or
    ``debugger › component.state`` for each map-shaped captured state."""
    return [overlay.name for overlay in _overlays(outputs)]


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


def _scaled(name: str, values: np.ndarray) -> Overlay:
    """A map over its own range; one holding only 0 and 1 is a mask."""
    finite = values[np.isfinite(values)]
    if finite.size and np.isin(finite, (0.0, 1.0)).all():
        return Overlay(name, values, mask=True)
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    return Overlay(name, values, low, high)


def picture_png(image: Optional[np.ndarray], overlay: Optional[Overlay], max_side: int) -> bytes:
    """``image`` ((H, W, 3) or (H, W) in [0, 1], as ``values.first_image`` gives it) shrunk so no side exceeds
    ``max_side`` (area average; a smaller one is kept as it is, the page scales it up pixelated), with ``overlay``
    stretched over it, as PNG bytes; the overlay alone where there is no image."""
    picture = None if image is None else _shrunk(display_image(image), max_side)
    if overlay is not None:
        picture = _shrunk(composite(picture, _heatmap(overlay, picture))[..., :3], max_side)
    if picture is None:
        raise ValueError("nothing to draw: no image and no overlay")
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
    if overlay.mask:
        return go.Heatmap(z=np.where(values == 1.0, 1.0, np.nan), colorscale=[[0, MASK_COLOUR], [1, MASK_COLOUR]],
                          zmin=0.0, zmax=1.0, opacity=MASK_OPACITY, **stretch)
    return go.Heatmap(z=values, colorscale=HEAT_SCALE, zmin=overlay.low, zmax=overlay.high, opacity=OPACITY, **stretch)
