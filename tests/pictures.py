"""Reading the viewer's pictures back (``runners/eval_viewer/figures/pictures.py``): the PNG of a mosaic as its maps'
colours, and the colours a captured array should have, computed by plotly's own sampling of the colour scale (not by
the viewer's ``colours``), so a test checks what is drawn against the captured numbers."""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence

import numpy as np
import PIL.Image
import plotly.colors


def png_pixels(href: str) -> np.ndarray:
    """The pixels of a ``data:image/png;base64,...`` address."""
    return np.asarray(PIL.Image.open(io.BytesIO(base64.b64decode(href.split(",", 1)[1]))))


def sampled_colours(colorscale: str | Sequence, shares: np.ndarray) -> np.ndarray:
    """plotly's own colours of ``shares`` (0..1) along a colour scale (a name or its stops), as an (..., 3) array."""
    scale = plotly.colors.get_colorscale(colorscale) if isinstance(colorscale, str) else colorscale
    scale = [[p, c if c.startswith("rgb") else f"rgb{plotly.colors.hex_to_rgb(c)}"] for p, c in scale]
    sampled = plotly.colors.sample_colorscale(scale, list(np.ravel(shares)))
    return np.array([plotly.colors.unlabel_rgb(c) for c in sampled]).reshape(*np.shape(shares), 3)


def mosaic_blocks(pixels: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Where a mosaic's maps are in its PNG (RGBA, clear between the maps): each map's first and past-last row and
    column, rows of maps top to bottom, maps of a row left to right."""
    opaque = pixels[..., 3] == 255
    return [(r0, r1, c0, c1) for r0, r1 in _runs(opaque.any(axis=1)) for c0, c1 in _runs(opaque.any(axis=0))]


def mosaic_maps(pixels: np.ndarray) -> np.ndarray:
    """A mosaic's maps, each as its cells' colours in reading order (``mosaic_blocks``)."""
    return np.stack([pixels[r0:r1, c0:c1, :3].reshape(-1, 3) for r0, r1, c0, c1 in mosaic_blocks(pixels)])


def feature_map_colours(maps: list[np.ndarray]) -> list[np.ndarray]:
    """How a comparison colours the same channels of several columns ((channels, h, w) each): on one Viridis scale
    over all of them, then the last minus the first on RdBu_r centred on 0; each as (channels, h * w, 3)."""
    low, high = min(float(m.min()) for m in maps), max(float(m.max()) for m in maps)
    change = maps[-1] - maps[0]
    bound = float(np.abs(change).max())
    shares = [(m - low) / (high - low) for m in maps] + [(change / bound + 1) / 2]
    return [sampled_colours(scale, share).reshape(len(share), -1, 3)
            for scale, share in zip(["Viridis"] * len(maps) + ["RdBu_r"], shares)]


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(int), [0]])))
    return list(zip(edges[::2], edges[1::2]))
