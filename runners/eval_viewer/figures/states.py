"""Figures of captured states (``CaptureDebugger``), each drawn by its own kind (``STATE_FIGURES``); a state the
same for every datapoint (a position encoding) is marked shared."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import plotly.graph_objects as go

from debuggers import outputs as kinds
from runners.eval_viewer.figures.arrays import array_figures, generic_figures
from runners.eval_viewer.figures.attention import attention_heads_figure
from runners.eval_viewer.figures.base import AXIS_TITLES, SHARED, Figures, finish, heatmap, image_axes, pca_rgb


def captured_states_figures(output: dict[str, Any]) -> Figures:
    """Each captured state drawn by its own kind, titled ``component.state``; a state the same for every
    datapoint (``shared``) is marked so in its title and in ``layout.meta['shared']``."""
    figures: Figures = []
    for component, states in output.get("states", {}).items():
        for state, record in states.items():
            drawn = captured_state_figures(record, f"{component}.{state}")
            if record.get("shared"):
                for fig in drawn:
                    fig.update_layout(title_text=f"{fig.layout.title.text} · {SHARED}", meta={
                        **(fig.layout.meta or {}), "shared": True})
            figures.extend(drawn)
    return figures


def captured_state_figures(record: dict[str, Any], title: str) -> Figures:
    """One state ``{'kind', 'data', 'metadata'}``, drawn by its kind (``STATE_FIGURES``; an array of another kind
    as a tensor's); data that is no array in a table."""
    data, metadata = record.get("data"), record.get("metadata") or {}
    if not isinstance(data, np.ndarray):
        return generic_figures(data, title)
    return STATE_FIGURES.get(record.get("kind"), tensor_figures)(data, metadata, title)


def attention_state_figures(data: np.ndarray, metadata: dict[str, Any], title: str) -> Figures:
    """Attention weights or scores (heads, queries, keys): one map per head."""
    return [attention_heads_figure(data.astype(np.float64), title)] if data.ndim >= 2 else array_figures(data, title)


def tensor_figures(data: np.ndarray, metadata: dict[str, Any], title: str) -> Figures:
    """Any array a capture point gave: by its shape (``array_figures``)."""
    return array_figures(data, title)


def embedding_figures(data: np.ndarray, metadata: dict[str, Any], title: str) -> Figures:
    """A (C, H, W) map, or (N, D) tokens on ``metadata['grid']``, as a PCA RGB image (and tokens as a heatmap)."""
    figures: Figures = []
    grid = metadata.get("grid")
    if data.ndim == 2:
        fig = go.Figure(heatmap(data, colorscale="RdBu"))
        fig.update_xaxes(title_text="channel")
        fig.update_yaxes(title_text="token", autorange="reversed")
        figures.append(finish(fig, f"{title} {list(data.shape)}", margin=AXIS_TITLES))
        if grid is not None and len(grid) == 2 and grid[0] * grid[1] == data.shape[0]:
            data = data.T.reshape(data.shape[1], int(grid[0]), int(grid[1]))
    if data.ndim == 3:
        fig = go.Figure(go.Image(z=pca_rgb(data)))
        fig = image_axes(fig)
        figures.insert(0, finish(fig, f"{title}: top-3 principal components as RGB", 320))
    return figures or array_figures(data, title)


StateDraw = Callable[[np.ndarray, dict[str, Any], str], Figures]  # a state's data, its metadata and its title
# Each kind a captured state can have (``debuggers.outputs.STATE_FIELDS``) and what draws it.
STATE_FIGURES: dict[str, StateDraw] = {
    kinds.KIND_ATTENTION: attention_state_figures,
    kinds.KIND_EMBEDDING: embedding_figures,
    kinds.KIND_POSITION_ENCODING: embedding_figures,
    kinds.KIND_TENSOR: tensor_figures,
}
