"""Masks and prompt points drawn into a small picture of a datapoint (a gallery tile, the export's input image).

A tint alone vanishes where the image has the tint's colour (a magenta mask on a magenta scene), so each mask is a
light tint with an edge in its colour, and a one-pixel halo around the edge, black or white, whichever stands out
from the pixels around it. A mask without a colour of its own (a predicted or label mask) takes, of a few vivid
colours, the one farthest from the image under it; the errors keep the colours the Datapoint tab's masks figure
gives them (false positives red, false negatives amber). A prompt point is a white ring inside a dark edge.
Pictures are drawn at least ``MARK_PX`` a side (nearest-neighbour, the pixels stay sharp), so marks are finer than a
32-pixel image's pixels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

MARK_PX = 128
TINT = 0.35
EDGE_PX = 2
VIVID = {"magenta": (255, 0, 255), "cyan": (0, 255, 255), "yellow": (255, 230, 0), "lime": (50, 255, 50),
         "orange": (255, 128, 0), "blue": (40, 90, 255)}
FALSE_POSITIVE, FALSE_NEGATIVE = (228, 26, 28), (255, 191, 0)  # as figures/masks.py's LAYERS
RING = 0.045  # a prompt ring's radius, as a share of the picture's longer side


@dataclass(frozen=True)
class Layer:
    """A mask to draw: its pixels (h, w) and its colour (None: the vivid colour farthest from the image under it)."""

    pixels: np.ndarray
    colour: Optional[tuple[int, int, int]] = None


def marked(picture: np.ndarray, layers: list[Layer], points: Optional[np.ndarray] = None,
           image_shape: Optional[tuple[int, int]] = None) -> np.ndarray:
    """``picture`` ((H, W, 3) uint8) enlarged to at least ``MARK_PX`` a side, each layer's mask stretched over it
    (tint, edge, halo), and ``points`` ((N, 2) (x, y) in pixels of an image of ``image_shape``, by default the
    picture's) ringed."""
    height, width = picture.shape[:2]
    factor = max(1, math.ceil(MARK_PX / max(height, width)))
    drawn = np.repeat(np.repeat(picture, factor, axis=0), factor, axis=1).astype(np.float64)
    for layer in layers:
        mask = _stretched(np.asarray(layer.pixels, dtype=bool), drawn.shape[:2])
        if mask.any():
            _paint_mask(drawn, mask, np.array(layer.colour or contrasting(drawn, mask), dtype=np.float64))
    if points is not None and len(points):
        shape = image_shape or (height, width)
        scale = np.array([drawn.shape[1] / shape[1], drawn.shape[0] / shape[0]])
        for point in np.asarray(points, dtype=np.float64).reshape(-1, 2) * scale:
            _ring(drawn, point, RING * max(drawn.shape[:2]))
    return drawn.round().clip(0, 255).astype(np.uint8)


def contrasting(picture: np.ndarray, mask: np.ndarray) -> tuple[int, int, int]:
    """The vivid colour farthest from the mean colour of ``picture`` under ``mask`` and around it."""
    mean = picture[_grown(mask, EDGE_PX * 2)].reshape(-1, 3).mean(axis=0)
    return max(VIVID.values(), key=lambda colour: float(np.sum((np.array(colour) - mean) ** 2)))


def _paint_mask(drawn: np.ndarray, mask: np.ndarray, colour: np.ndarray) -> None:
    inner = _shrunk(mask, EDGE_PX)
    edge, halo = mask & ~inner, _grown(mask, 1) & ~mask
    drawn[inner] = drawn[inner] * (1 - TINT) + colour * TINT
    drawn[edge] = colour
    if halo.any():
        drawn[halo] = 0.0 if _luminance(drawn[halo].mean(axis=0)) > 110 else 255.0


def _ring(drawn: np.ndarray, centre: np.ndarray, radius: float) -> None:
    """A white ring (2 px) between dark edges (1 px each) around ``centre`` ((x, y) in the picture's pixels)."""
    rows, columns = np.mgrid[:drawn.shape[0], :drawn.shape[1]]
    distance = np.hypot(columns + 0.5 - centre[0], rows + 0.5 - centre[1])
    drawn[np.abs(distance - radius) <= 2.0] = 0.0
    drawn[np.abs(distance - radius) <= 1.0] = 255.0


def _stretched(mask: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A (h, w) mask at ``shape``: each picture pixel takes the mask cell over its centre."""
    rows = np.minimum((np.arange(shape[0]) + 0.5) * mask.shape[0] // shape[0], mask.shape[0] - 1).astype(int)
    columns = np.minimum((np.arange(shape[1]) + 0.5) * mask.shape[1] // shape[1], mask.shape[1] - 1).astype(int)
    return mask[rows[:, None], columns[None, :]]


def _shrunk(mask: np.ndarray, steps: int) -> np.ndarray:
    """The mask less ``steps`` pixels at its border (4-neighbour erosion; the picture's edge is not a border)."""
    for _ in range(steps):
        padded = np.pad(mask, 1, mode="edge")
        mask = mask & padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:]
    return mask


def _grown(mask: np.ndarray, steps: int) -> np.ndarray:
    """The mask and ``steps`` pixels around it (4-neighbour dilation)."""
    return ~_shrunk(~mask, steps)


def _luminance(rgb: np.ndarray) -> float:
    return float(0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2])
