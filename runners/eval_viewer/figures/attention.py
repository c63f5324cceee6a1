"""Figures of attention: each head's (query, key) map, labelled by token; the attention an image's patches get, over
the image; each head's entropy; and a datapoint's attention at every captured layer at a glance."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import plotly.graph_objects as go

from debuggers import outputs as kinds
from debuggers.capture import split_frame
from runners.eval_viewer.figures.base import (
    AXIS_TITLES,
    IMAGE_AXIS,
    JET,
    NARROW_BAR_MARGIN,
    PLOT_PX,
    VIRIDIS,
    Figures,
    colour_bar,
    display_image,
    finish,
    finished,
    fit_title,
    image_axes,
    labelled_mosaic,
    narrow_colour_bar,
    plain_figure,
    shrunk_mosaic,
    stretched_over,
    title_number,
    top_margin,
)
from runners.eval_viewer.figures.context import DrawContext

MAX_HEADS = 8
MAX_TOKENS = 8  # tokens drawn as rows of maps over an image grid
MIN_ASPECT = 0.25  # a (queries, keys) map is drawn at least a quarter as tall as it is wide
TILE_PX = 110  # the most pixels a side a map over an image grid is drawn at


def attention_figures(output: dict[str, Any], context: DrawContext) -> Figures:
    """Each head's attention (``attention_heads_figure``); over the input image, how much attention each patch gets;
    the entropy of each head beside the uniform level."""
    image, tokens = context.image, context.tokens
    attention = np.asarray(output["attention"], dtype=np.float64)
    name = output.get("layer_name", "")
    figures = [attention_heads_figure(attention, f"{name} attention (max {title_number(output.get('max_attention'))})",
                                      tokens, output.get("grid"))]
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
    bars = {"type": "bar", "x": [f"head {h}" for h in range(len(entropy))], "y": entropy}
    layout = {"shapes": [{"type": "line", "xref": "x domain", "x0": 0, "x1": 1, "yref": "y", "y0": uniform,
                          "y1": uniform, "line": {"dash": "dash", "color": "#e45756"}}],
              "annotations": [{"text": f"uniform over {keys} keys", "xref": "x domain", "x": 0, "xanchor": "left",
                               "yref": "y", "y": uniform, "yanchor": "bottom", "showarrow": False}],
              "yaxis": {"title": {"text": "entropy (nats)"},
                        "range": [0, 1.1 * max(uniform, float(np.nanmax(entropy)), 1e-3)]}}
    return finished([bars], layout, f"{name} attention entropy per head (uniform = {title_number(uniform)})", 260,
                    AXIS_TITLES)


def attention_heads_figure(attention: np.ndarray, title: str, tokens: Optional[list[str]] = None,
                           grid: Optional[list[int]] = None) -> go.Figure:
    """Each head's (query, key) weights: where one side lies on an image grid (``grid_side``), a table of maps over
    the grid, a row per token of the other side and a column per head; else a map per head, both axes labelled in
    every tile."""
    heads = attention.reshape(-1, *attention.shape[-2:])[:MAX_HEADS]
    side = grid_side(*heads.shape[-2:], grid)
    if side is not None:
        columns = [(f"head {h}", weights) for h, weights in enumerate(heads)]
        return token_grid_figure(columns, side, tokens, f"{title}, per head, {_over_grid(side)}")
    return attention_maps_figure(list(heads), [f"head {h}" for h in range(len(heads))], title, tokens)


def grid_side(queries: int, keys: int, grid: Optional[list[int]] = None) -> Optional[tuple[str, tuple[int, int]]]:
    """Which side of a (queries, keys) attention lies on an image grid, and the grid: ``'keys'`` where a few tokens
    look over the image (SAM's tokens to the image), ``'queries'`` where the image's cells look at a few tokens;
    None for tokens to tokens (self-attention, text). The grid is the capture point's (``metadata['grid']``), else a
    square number of keys (or queries) facing fewer tokens."""
    if queries == keys:
        return None
    if grid is not None and len(grid) == 2:
        shape = (int(grid[0]), int(grid[1]))
        cells = shape[0] * shape[1]
        if cells == keys and queries % cells:
            return "keys", shape
        return ("queries", shape) if cells == queries and keys % cells else None  # else the image to images
    for side, cells, other in (("keys", keys, queries), ("queries", queries, keys)):
        if cells >= 4 and math.isqrt(cells) ** 2 == cells and other < cells:
            return side, (math.isqrt(cells), math.isqrt(cells))
    return None


def token_grid_figure(columns: list[tuple[str, np.ndarray]], side: tuple[str, tuple[int, int]],
                      tokens: Optional[list[str]], title: str) -> go.Figure:
    """(queries, keys) weights with one side on an image grid (``grid_side``), as a table of maps over the grid:
    a row per token of the other side (at most ``MAX_TOKENS``; named by ``tokens``), a column per entry of
    ``columns`` (caption, weights), on one colour scale; the value on hover, where the captions beside it say which
    token and column (spelled out in every cell, they were most of the figure's bytes)."""
    where, (height, width) = side
    rows = [[(weights if where == "keys" else weights.T)[t].reshape(height, width) for _, weights in columns]
            for t in range(min(MAX_TOKENS, columns[0][1].shape[0 if where == "keys" else 1]))]
    names = [str(tokens[t]) if tokens is not None and len(tokens) > t else f"token {t}" for t in range(len(rows))]
    mosaic, labels, tile = labelled_mosaic(rows, [name[:10] for name in names], [caption for caption, _ in columns])
    heat = {"type": "heatmap", "z": mosaic.astype(np.float32), "colorscale": VIRIDIS, "zmin": 0.0, "hoverongaps": False,
            "colorbar": narrow_colour_bar("attention weight"),
            "hovertemplate": "row %{y:.0f}, col %{x:.0f}: %{z:.4f}<extra></extra>"}
    layout = {"annotations": labels, "showlegend": False, "plot_bgcolor": "white",
              "meta": {"tiles": [[r * tile[0], c * tile[1], height, width] for r in range(len(rows))
                                 for c in range(len(columns))]},
              "xaxis": {**IMAGE_AXIS, "scaleanchor": "y", "constraintoward": "left"},
              "yaxis": {**IMAGE_AXIS, "autorange": "reversed", "constraintoward": "top"}}
    cell = min(TILE_PX / max(height, width), (PLOT_PX - 20) / mosaic.shape[1])
    title = fit_title(title)
    top = top_margin(title, [str(label["text"]) for label in labels[:len(columns)]])
    return finished([heat], layout, title, int(top + 30 + cell * mosaic.shape[0]),
                    {"l": 80, "t": top, "r": NARROW_BAR_MARGIN})


def _over_grid(side: tuple[str, tuple[int, int]]) -> str:
    """What a ``token_grid_figure``'s rows show, in words."""
    where, (height, width) = side
    return f"each token {'over' if where == 'keys' else 'as seen from'} the {height}x{width} grid"


def attention_maps_figure(maps: list[np.ndarray], captions: list[str], title: str,
                          tokens: Optional[list[str]] = None) -> go.Figure:
    """(query, key) maps side by side (two a row where they are wide), both axes labelled in every tile: token
    indices, or the token strings where the datapoint gives one per key and query. A map is drawn at least
    ``MIN_ASPECT`` as tall as wide: a few queries over many keys get taller rows, not a sliver."""
    queries, keys = maps[0].shape[-2:]
    columns = 2 if keys > 4 * queries else 4
    mosaic, tiles, labels = shrunk_mosaic(maps, captions, columns)
    stretch = max(1.0, MIN_ASPECT * keys / queries)
    names = tokens if tokens is not None and len(tokens) == keys == queries else None
    for note in labels:
        note["y"] = (note["y"] + 0.5) * stretch - 0.5
    heat = {"type": "heatmap", "z": mosaic, "colorscale": VIRIDIS, "hoverongaps": False, "dy": stretch,
            "y0": (stretch - 1) / 2, "colorbar": narrow_colour_bar("attention weight")}
    plot = float(np.clip(PLOT_PX * mosaic.shape[0] * stretch / mosaic.shape[1], 60, 600))
    layout = {"annotations": labels, "plot_bgcolor": "white",
              "meta": {"tiles": tiles, "picture": False, "stretch": stretch},  # weights are read on hover
              "xaxis": {**IMAGE_AXIS, "scaleanchor": "y", "showticklabels": True,
                        "title": {"text": "key" + (" token" if names else " (token index)")},
                        **_tile_ticks([(left, width) for _, left, _, width in tiles], keys, names)},
              "yaxis": {**IMAGE_AXIS, "autorange": "reversed", "constraintoward": "top", "showticklabels": True,
                        "title": {"text": "query" + (" token" if names else " (token index)")},
                        **_tile_ticks([(top, height) for top, _, height, _ in tiles], queries, names, stretch)}}
    return finished([heat], layout, title, int(plot + 50 + 60 + 20), {"l": 70, "b": 60, "r": NARROW_BAR_MARGIN})


def _tile_ticks(spans: list[tuple[int, int]], length: int, names: Optional[list[str]],
                stretch: float = 1.0) -> dict[str, Any]:
    """Tick positions and labels along one side of a mosaic (drawn ``stretch`` units a cell): a few token indices
    (or names) in each tile."""
    values, texts = [], []
    for start, cells in sorted(set(spans)):
        per_cell = length / cells  # more than 1 where the map was block-averaged
        step = max(1, math.ceil(cells / (16 if names else 4)))
        for cell in range(0, cells, step):
            index = int(cell * per_cell)
            values.append((start + cell) * stretch + (stretch - 1) / 2)
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
    data = [{"type": "image", "z": picture, "hoverinfo": "skip"},
            {"type": "heatmap", "z": heat, "colorscale": JET, "colorbar": colour_bar("attention weight"),
             **stretched_over(picture, heat),
             "hovertemplate": "patch row %{y:.0f}, col %{x:.0f}: %{z:.3f}<extra></extra>"}]
    return finish(image_axes(plain_figure(data, {})), title, 360)


@dataclass(frozen=True)
class LayerAttention:
    """One layer's attention in a datapoint's outputs, averaged over heads."""

    caption: str  # the layer ('two_way_transformer_layer_0') or the debugger ('prompt_attention')
    weights: np.ndarray  # (queries, keys)
    grid: Optional[list[int]]
    tokens: Optional[list[str]]  # the names of the tokens that are not the grid's cells
    self_attention: bool


def attention_across_layers_figures(debug: dict[str, Any]) -> Figures:
    """A datapoint's attention at every captured layer, averaged over heads, one figure per kind of attention that
    two or more layers have: self-attention apart from cross-attention, and each direction of cross-attention
    apart (tokens to the image, the image to tokens), so a figure's maps have one shape and one meaning. Layers are
    the ``AttentionDebugger`` outputs and the captured attention states that are weights (in [0, 1], rows summing
    to 1; scores before the softmax are left out)."""
    groups: dict[tuple, list[LayerAttention]] = {}
    for layer in _layers_with_attention(debug):
        queries, keys = layer.weights.shape
        side = None if layer.self_attention else grid_side(queries, keys, layer.grid)
        kind = "self" if layer.self_attention else side if side is not None else "cross"
        groups.setdefault((kind, queries, keys), []).append(layer)
    return [_across_figure(kind, layers) for (kind, _, _), layers in groups.items() if len(layers) >= 2]


def _layers_with_attention(debug: dict[str, Any]) -> list[LayerAttention]:
    """Every attention in a datapoint's outputs that is weights, in the order of the debuggers and their states (a
    clip's at its first frame)."""
    found = []
    for name, output in debug.items():
        kind = output.get("kind") if isinstance(output, dict) else None
        if kind == kinds.KIND_ATTENTION:
            found.append((name, "", output.get("attention"), {"grid": output.get("grid")}))
        elif kind == kinds.KIND_CAPTURED_STATES:
            states_of = output.get("states") or {}
            frames = [frame for component in states_of if (frame := split_frame(component)[1]) is not None]
            for component, states in states_of.items():
                if frames and split_frame(component)[1] not in (None, min(frames)):
                    continue  # a clip's layers at its first frame: the memory figures show the frames
                for state, record in (states or {}).items():
                    if isinstance(record, dict) and record.get("kind") == kinds.KIND_ATTENTION:
                        found.append((split_frame(component)[0], state, record.get("data"),
                                      record.get("metadata") or {}))
    captions = iter(_short_captions([caption for caption, state, _, _ in found if state]))
    layers = []
    for caption, state, data, metadata in found:
        caption = next(captions) if state else caption
        weights = _head_average(data)
        if weights is None:
            continue
        tokens = metadata.get("query_tokens") or metadata.get("key_tokens")
        layers.append(LayerAttention(caption, weights, metadata.get("grid"), list(tokens) if tokens else None,
                                     "self" in state or (weights.shape[0] == weights.shape[1]
                                                         and "cross" not in state and "_to_" not in state)))
    return layers


def _across_figure(kind: Any, layers: list[LayerAttention]) -> go.Figure:
    """One kind of attention at each of ``layers``, a column per layer."""
    captions = [layer.caption for layer in layers]
    tokens = next((layer.tokens for layer in layers if layer.tokens), None)
    count = f"across {len(layers)} layers"
    if isinstance(kind, tuple):
        title = f"cross-attention {count}: {_over_grid(kind)}, heads averaged"
        fig = token_grid_figure([(c, layer.weights) for c, layer in zip(captions, layers)], kind, tokens, title)
    else:
        queries, keys = layers[0].weights.shape
        title = (f"self-attention {count}, {queries} tokens" if kind == "self" else
                 f"cross-attention {count}, {queries} queries to {keys} keys") + ", heads averaged"
        fig = attention_maps_figure([layer.weights for layer in layers], captions, title, tokens)
    return fig


def _short_captions(components: list[str]) -> list[str]:
    """Captured layers' names less the words they all start with, but for the word a number follows
    ('two_way_transformer_layer_0', '..._layer_1', '..._final' -> 'layer_0', 'layer_1', 'final')."""
    words = [re.split(r"(?<=[._])", name) for name in components]
    shared = 0
    while words and all(len(w) > shared + 1 and w[shared] == words[0][shared] for w in words):
        shared += 1
    if shared and any(w[shared][:1].isdigit() for w in words):
        shared -= 1
    return ["".join(w[shared:]) for w in words]


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
