"""Figures of attention: each head's (query, key) map, labelled by token; the attention an image's patches get, over
the image; each head's entropy; and a datapoint's attention at every captured layer at a glance."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import plotly.graph_objects as go

from debuggers import outputs as kinds
from runners.eval_viewer.figures.base import (
    AXIS_TITLES,
    Figures,
    colour_bar,
    display_image,
    finish,
    image_axes,
    maps_figure,
    stretched_over,
    title_number,
)
from runners.eval_viewer.figures.context import DrawContext

MAX_HEADS = 8


def attention_figures(output: dict[str, Any], context: DrawContext) -> Figures:
    """One heatmap per head (queries down, keys across, axes labelled by token index or the context's tokens); over
    the input image, how much attention each patch gets; the entropy of each head beside the uniform level."""
    image, tokens = context.image, context.tokens
    attention = np.asarray(output["attention"], dtype=np.float64)
    name = output.get("layer_name", "")
    figures = [attention_heads_figure(attention, f"{name} attention (max {title_number(output.get('max_attention'))})",
                                      tokens)]
    patches = patch_attention(attention, output.get("grid"))
    if patches is not None and image is not None:
        figures.append(_overlay(patches[0], image, f"{name}: {patches[1]} over the input image's patches"))
    entropy = np.asarray(output.get("entropy_per_head", []), dtype=np.float64)
    if entropy.size:
        figures.append(entropy_figure(entropy, attention.shape[-1], name))
    return figures


def entropy_figure(entropy: np.ndarray, keys: int, name: str) -> go.Figure:
    """Bars of each head's entropy and a line at the uniform level, log(number of real keys)."""
    uniform = math.log(max(keys, 1))
    fig = go.Figure(go.Bar(x=[f"head {h}" for h in range(len(entropy))], y=entropy))
    fig.add_hline(y=uniform, line={"dash": "dash", "color": "#e45756"}, annotation_text=f"uniform over {keys} keys",
                  annotation_position="top left")
    fig.update_yaxes(title_text="entropy (nats)", range=[0, 1.1 * max(uniform, float(np.nanmax(entropy)), 1e-3)])
    return finish(fig, f"{name} attention entropy per head (uniform = {title_number(uniform)})", 260, AXIS_TITLES)


def attention_heads_figure(attention: np.ndarray, title: str, tokens: Optional[list[str]] = None) -> go.Figure:
    """The heads as a grid of (query, key) maps, both axes labelled in every tile: token indices, or the
    token strings where the datapoint gives one per key and query."""
    heads = attention.reshape(-1, *attention.shape[-2:])[:MAX_HEADS]
    fig = maps_figure(list(heads), [f"head {h}" for h in range(len(heads))], title, "attention weight")
    queries, keys = heads.shape[-2:]
    names = tokens if tokens is not None and len(tokens) == keys == queries else None
    tiles = fig.layout.meta["tiles"]
    fig.update_xaxes(showticklabels=True, title_text="key" + (" token" if names else " (token index)"),
                     **_tile_ticks([(left, width) for _, left, _, width in tiles], keys, names))
    fig.update_yaxes(showticklabels=True, title_text="query" + (" token" if names else " (token index)"),
                     **_tile_ticks([(top, height) for top, _, height, _ in tiles], queries, names))
    fig.update_layout(margin={"l": 70, "b": 60}, height=fig.layout.height + 40,
                      meta={**fig.layout.meta, "picture": False})  # attention weights are read on hover
    return fig


def _tile_ticks(spans: list[tuple[int, int]], length: int, names: Optional[list[str]]) -> dict[str, Any]:
    """Tick positions and labels along one side of a mosaic: a few token indices (or names) in each tile."""
    values, texts = [], []
    for start, cells in sorted(set(spans)):
        per_cell = length / cells  # more than 1 where the map was block-averaged
        step = max(1, math.ceil(cells / (16 if names else 4)))
        for cell in range(0, cells, step):
            index = int(cell * per_cell)
            values.append(start + cell)
            texts.append(str(names[index])[:8] if names else str(index))
    return {"tickmode": "array", "tickvals": values, "ticktext": texts, "tickfont": {"size": 9}}


SPECIAL_TOKENS = (0, 1, 2, 4, 5)  # none; CLS; CLS + distillation; register tokens (+ CLS)


def patch_attention(attention: np.ndarray, grid: Optional[list[int]] = None) -> Optional[tuple[np.ndarray, str]]:
    """The attention each image patch gets, as an (h, w) map, and what it is; None for non-image tokens.

    The keys are patches on ``maps_figure`` (from the capture point) after ``keys - h*w`` special tokens, or,
    without a grid, a square number of patches after the fewest special tokens that leave a square.
    With special tokens first, the first query's (CLS) attention over the patches, averaged over heads;
    without, the mean over queries and heads of the attention each patch receives.
    """
    heads = attention.reshape(-1, *attention.shape[-2:])
    keys = heads.shape[-1]
    if grid is not None and len(grid) == 2 and 0 < grid[0] * grid[1] <= keys:
        shape, special = (int(grid[0]), int(grid[1])), keys - int(grid[0]) * int(grid[1])
    else:
        found = [s for s in SPECIAL_TOKENS if keys - s >= 4 and math.isqrt(keys - s) ** 2 == keys - s]
        if not found:
            return None
        side = math.isqrt(keys - found[0])
        shape, special = (side, side), found[0]
    if special:
        return heads[:, 0, special:].mean(axis=0).reshape(shape), "the first (CLS) token's attention"
    return heads.mean(axis=(0, 1)).reshape(shape), "the mean attention received"


def _overlay(heat: np.ndarray, image: np.ndarray, title: str) -> go.Figure:
    """``heat`` (h, w) stretched over ``image``, as Grad-CAM is drawn."""
    picture = display_image(image)
    fig = go.Figure([go.Image(z=picture, hoverinfo="skip"),
                     go.Heatmap(z=heat, colorscale="Jet", colorbar=colour_bar("attention weight"),
                                **stretched_over(picture, heat),
                                hovertemplate="patch row %{y:.0f}, col %{x:.0f}: %{z:.3f}<extra></extra>")])
    image_axes(fig)
    return finish(fig, title, 360)


def attention_across_layers_figure(debug: dict[str, Any]) -> Optional[go.Figure]:
    """One figure of a datapoint's attention at every captured layer, each averaged over heads (queries down, keys
    across) on one colour scale, when it has two or more: ``AttentionDebugger`` outputs, and captured attention
    states that are weights (in [0, 1], rows summing to 1; scores before the softmax are left out)."""
    maps, titles = [], []
    for name, output in debug.items():
        kind = output.get("kind") if isinstance(output, dict) else None
        if kind == kinds.KIND_ATTENTION:
            maps.append(output.get("attention"))
            titles.append(f"{name}: {output.get('layer_name', '')}")
        elif kind == kinds.KIND_CAPTURED_STATES:
            for component, states in (output.get("states") or {}).items():
                for state, record in (states or {}).items():
                    if isinstance(record, dict) and record.get("kind") == kinds.KIND_ATTENTION:
                        maps.append(record.get("data"))
                        titles.append(f"{component}.{state}")
    averaged = [(_head_average(m), t) for m, t in zip(maps, titles)]
    averaged = [(m, t) for m, t in averaged if m is not None]
    if len(averaged) < 2:
        return None
    fig = maps_figure([m for m, _ in averaged], [t for _, t in averaged],
                      f"attention across {len(averaged)} layers, averaged over heads", "attention weight")
    fig.update_layout(meta={**fig.layout.meta, "picture": False})  # read on hover
    return fig


def _head_average(attention: Any) -> Optional[np.ndarray]:
    """(…, Lq, Lk) weights averaged over every leading dimension (heads); None for anything that is not weights."""
    if not isinstance(attention, np.ndarray) or attention.ndim < 2 or attention.dtype.kind not in "fiu" \
            or not attention.size:
        return None
    weights = attention.astype(np.float64).reshape(-1, *attention.shape[-2:])
    rows = weights.sum(axis=-1)
    finite = np.isfinite(rows)
    if not finite.any() or np.nanmin(weights) < 0 or np.nanmax(weights) > 1 + 1e-3 \
            or not np.allclose(rows[finite], 1, atol=2e-3):
        return None
    return np.nanmean(weights, axis=0)
