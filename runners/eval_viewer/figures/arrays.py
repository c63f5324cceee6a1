"""Figures of any array, and of outputs of no known kind (a user's debugger): bars, histograms, heatmaps,
maps as a mosaic, numbers in a table."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from runners.eval_viewer.figures.base import MAX_PANELS, Figures, finish, heatmap, maps_figure, table_figure

MAX_GENERIC_FIGURES = 12


def array_figures(array: np.ndarray, title: str, unit: str = "value") -> Figures:
    """Any array: bars (short vectors), a histogram (long ones), a heatmap, or a grid of 2-D slices; ``unit`` is what
    its values are (a colour bar's title)."""
    array = np.asarray(array)
    if array.dtype.kind not in "biuf":
        return [table_figure([("value", array)], title)]
    array = array.astype(np.float64)
    if array.size == 0:
        return [table_figure([("value", f"empty array of shape {list(array.shape)}")], title)]
    if array.ndim == 0:
        return [table_figure([("value", float(array))], title)]
    if array.ndim == 1:
        trace = go.Bar(y=array) if array.size <= 64 else go.Histogram(x=array[np.isfinite(array)])
        return [finish(go.Figure(trace), f"{title} {list(array.shape)}", 260)]
    if array.ndim == 2:
        fig = go.Figure(heatmap(array, unit))
        fig.update_yaxes(autorange="reversed")
        return [finish(fig, f"{title} {list(array.shape)}")]
    slices = array.reshape(-1, *array.shape[-2:])
    shown = min(len(slices), MAX_PANELS)
    return [maps_figure(list(slices[:shown]), [f"[{i}]" for i in range(shown)],
                        f"{title} {list(array.shape)}: first {shown} of {len(slices)} maps", unit)]


def generic_figures(value: Any, title: str = "output") -> Figures:
    """Outputs without a known kind: numbers in one table, every array in its own figure."""
    scalars: list[tuple[str, Any]] = []
    arrays: list[tuple[str, np.ndarray]] = []
    _collect(value, title, scalars, arrays)
    figures = [table_figure(scalars, title)] if scalars else []
    for path, array in arrays[:MAX_GENERIC_FIGURES]:
        figures.extend(array_figures(array, path))
    return figures


def _collect(value: Any, path: str, scalars: list, arrays: list) -> None:
    if isinstance(value, np.ndarray):
        (arrays if value.ndim else scalars).append((path, value if value.ndim else value.item()))
    elif isinstance(value, dict):
        for key, item in value.items():
            _collect(item, f"{path}.{key}", scalars, arrays)
    elif isinstance(value, (list, tuple)) and value and all(isinstance(v, (int, float)) for v in value):
        arrays.append((path, np.asarray(value, dtype=np.float64)))
    elif isinstance(value, (list, tuple)) and any(isinstance(v, (dict, np.ndarray, list, tuple)) for v in value):
        for i, item in enumerate(value):
            _collect(item, f"{path}[{i}]", scalars, arrays)
    else:
        scalars.append((path, value))
