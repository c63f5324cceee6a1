"""Drawing the values a datapoint holds (tensors, arrays, numbers, strings) whatever the dataset.

Datasets differ in what ``inputs``, ``labels`` and ``meta_info`` hold, so values
are drawn by what they are: an image-shaped array as an image, any other array
as its shape and statistics, a scalar as text, a dict as a table.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

import numpy as np
import plotly.graph_objects as go

IMAGE_CHANNELS = (1, 3)
# An input holding prompt points: (2,) or (N, 2), (x, y) in pixels of the input image (SAM's ``point_coords``)
POINT_NAMES = ("point", "points", "point_coords", "prompt_point", "prompt_points")
SMALL_ARRAY = 6  # values of an array this small are shown themselves, not its range
GRAPH_CONFIG = {"displaylogo": False, "responsive": True, "displayModeBar": "hover"}  # no toolbar over titles


def array_or_none(value: Any) -> Optional[np.ndarray]:
    """A NumPy view of a tensor or array; None for anything else."""
    torch = sys.modules.get("torch")  # a tensor exists only where torch is imported: a page reader's values are arrays
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().cpu().float().numpy() if value.is_floating_point() else value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value
    return None


def as_image(value: Any) -> Optional[np.ndarray]:
    """(H, W, 3) or (H, W) float image in [0, 1] from a (C, H, W) or (H, W) array; None if not image-shaped."""
    array = array_or_none(value)
    if array is None or array.dtype.kind not in "fiub" or array.size == 0:
        return None
    if array.ndim == 3 and array.shape[0] in IMAGE_CHANNELS:
        array = array[0] if array.shape[0] == 1 else array.transpose(1, 2, 0)
    elif array.ndim != 2 or min(array.shape) < 2:
        return None
    array = array.astype(np.float32)
    low, high = float(np.nanmin(array)), float(np.nanmax(array))
    return (array - low) / (high - low) if high > low else np.zeros_like(array)


def first_image(inputs: Optional[dict]) -> Optional[np.ndarray]:
    """The datapoint's input image (for overlays such as Grad-CAM), if it has one."""
    for value in (inputs or {}).values():
        image = as_image(value)
        if image is not None:
            return image
    return None


def points_of(value: Any) -> Optional[np.ndarray]:
    """(N, 2) finite (x, y) points from a numeric (2,) or (N, 2) array; None for anything else."""
    array = array_or_none(value)
    if array is None or array.dtype.kind not in "fiu" or array.size == 0 or array.shape[-1] != 2 \
            or array.ndim not in (1, 2):
        return None
    points = array.astype(np.float64).reshape(-1, 2)
    return points if np.isfinite(points).all() else None


def prompt_points(inputs: Optional[dict]) -> Optional[np.ndarray]:
    """The datapoint's prompt points (an input named as ``POINT_NAMES`` says), to mark on its input image."""
    for name, value in (inputs or {}).items():
        if str(name).lower() in POINT_NAMES:
            points = points_of(value)
            if points is not None:
                return points
    return None


def points_text(points: np.ndarray) -> str:
    """``(x, y) (12.5, 3)`` for one point, ``(x, y) (12.5, 3), (4, 5.5)`` for several."""
    return "(x, y) " + ", ".join(f"({x:.4g}, {y:.4g})" for x, y in points)


def token_strings(datapoint: dict[str, Any]) -> Optional[list[str]]:
    """The datapoint's tokens as strings (``tokens`` in its inputs or meta info), to label attention axes."""
    for part in ("inputs", "meta_info"):
        value = (datapoint.get(part) or {}).get("tokens")
        if isinstance(value, np.ndarray) and value.dtype.kind in "US":
            value = value.tolist()
        if isinstance(value, (list, tuple)) and value and all(isinstance(token, str) for token in value):
            return list(value)
    return None


def is_table(figure: go.Figure) -> bool:
    """Whether the figure is one table (``figures._table``)."""
    return len(figure.data) == 1 and isinstance(figure.data[0], go.Table)


def table_text(figure: go.Figure) -> str:
    """The cells of a one-table figure as aligned columns of text, its header first."""
    table = figure.data[0]
    header = [str(value) for value in table.header.values or ()]
    rows = [header, *([str(value) for value in row] for row in zip(*(list(column) for column in table.cells.values)))]
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows)


def value_summary(value: Any) -> str:
    """Text for a value that is not drawn as an image: scalars as such, arrays by shape and range."""
    array = array_or_none(value)
    if array is None:
        return _scalar_text(value)
    if array.size == 1:
        return _scalar_text(array.reshape(-1)[0].item())
    if array.dtype.kind in "fiub" and 0 < array.size <= SMALL_ARRAY:
        values = ", ".join(_scalar_text(value) for value in array.ravel().tolist())
        return f"array {tuple(array.shape)} {array.dtype}: [{values}]"
    if array.dtype.kind in "fiub" and array.size:
        return (f"array {tuple(array.shape)} {array.dtype}: min {np.nanmin(array):.4g}, "
                f"max {np.nanmax(array):.4g}, mean {np.nanmean(array):.4g}")
    return f"array {tuple(array.shape)} {array.dtype}"


def _scalar_text(value: Any) -> str:
    """Floats to 4 significant digits (a meta-info float printed to 17 digits hides its size)."""
    return f"{value:.4g}" if isinstance(value, (float, np.floating)) else str(value)
