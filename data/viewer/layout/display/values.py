"""Drawing the values a datapoint holds (tensors, arrays, numbers, strings) whatever the dataset.

Datasets differ in what ``inputs``, ``labels`` and ``meta_info`` hold, so values
are drawn by what they are: an image-shaped array as an image, any other array
as its shape and statistics, a scalar as text, a dict as a table.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import plotly.graph_objects as go
import torch
from dash import dcc, html

IMAGE_CHANNELS = (1, 3)
GRAPH_CONFIG = {"displaylogo": False, "responsive": True, "displayModeBar": "hover"}  # no toolbar over titles


def to_numpy(value: Any) -> Optional[np.ndarray]:
    """A NumPy view of a tensor or array; None for anything else."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().float().numpy() if value.is_floating_point() else value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value
    return None


def as_image(value: Any) -> Optional[np.ndarray]:
    """(H, W, 3) or (H, W) float image in [0, 1] from a (C, H, W) or (H, W) array; None if not image-shaped."""
    array = to_numpy(value)
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


def token_strings(datapoint: dict[str, Any]) -> Optional[list[str]]:
    """The datapoint's tokens as strings (``tokens`` in its inputs or meta info), to label attention axes."""
    for part in ("inputs", "meta_info"):
        value = (datapoint.get(part) or {}).get("tokens")
        if isinstance(value, np.ndarray) and value.dtype.kind in "US":
            value = value.tolist()
        if isinstance(value, (list, tuple)) and value and all(isinstance(token, str) for token in value):
            return list(value)
    return None


def image_graph(image: np.ndarray, title: str) -> dcc.Graph:
    """Built from graph objects directly: plotly.express costs ~100 ms per image, this ~10 ms."""
    if image.ndim == 3:
        trace = go.Image(z=(image * 255).astype(np.uint8), hoverinfo="x+y")
    else:
        trace = go.Heatmap(z=image, colorscale="gray", zmin=0, zmax=1, showscale=False)
    figure = go.Figure(trace, layout={
        "title": {"text": title}, "height": 260, "margin": {"l": 10, "r": 10, "t": 36, "b": 10},
        "xaxis": {"showticklabels": False, "scaleanchor": "y", "constrain": "domain"},
        "yaxis": {"showticklabels": False, "autorange": "reversed", "constrain": "domain"}})
    return dcc.Graph(figure=figure, config=GRAPH_CONFIG, className="datapoint-image")


def describe_value(value: Any) -> str:
    """Text for a value that is not drawn as an image: scalars as such, arrays by shape and range."""
    array = to_numpy(value)
    if array is None:
        return _scalar_text(value)
    if array.size == 1:
        return _scalar_text(array.reshape(-1)[0].item())
    if array.dtype.kind in "fiub" and array.size:
        return (f"array {tuple(array.shape)} {array.dtype}: min {np.nanmin(array):.4g}, "
                f"max {np.nanmax(array):.4g}, mean {np.nanmean(array):.4g}")
    return f"array {tuple(array.shape)} {array.dtype}"


def _scalar_text(value: Any) -> str:
    """Floats to 4 significant digits (a meta-info float printed to 17 digits hides its size)."""
    return f"{value:.4g}" if isinstance(value, (float, np.floating)) else str(value)


def value_component(name: str, value: Any) -> Any:
    """An image graph for image-shaped values, a table for dicts, text otherwise."""
    image = as_image(value)
    if image is not None:
        return image_graph(image, f"{name} {tuple(to_numpy(value).shape)}")
    if isinstance(value, dict):
        return html.Div([html.Strong(name), key_value_table(value)])
    return html.Div([html.Strong(f"{name}: "), html.Span(describe_value(value))])


def key_value_table(mapping: dict) -> html.Table:
    rows = [html.Tr([html.Th(str(key)), html.Td(describe_value(value))]) for key, value in mapping.items()]
    return html.Table(html.Tbody(rows), className="key-value-table")
