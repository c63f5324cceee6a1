"""Plotly figures for every kind of debug output, one datapoint at a time.

``figures_for_output(output, image)`` takes one datapoint's output as a page holds
it (NumPy arrays, numbers, strings) and returns figures; the eval viewer and
the HTML export (``runners.eval_viewer.export``) both draw through it. Figures are kept light because a
viewer page shows many: at most ``MAX_PANELS`` channels or heads, heatmaps
block-averaged to at most ``MAX_SIDE`` cells a side.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable
from typing import Any, Optional

import numpy as np
import PIL.Image
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from debuggers import outputs as kinds

MAX_PANELS = 16
MAX_HEADS = 8
MAX_SIDE = 128
MAX_GENERIC_FIGURES = 12
MAX_TABLE_ROWS = 24
TABLE_ROW_PX = 24
SHARED = "shared by every datapoint"
FLAG_COLOURS = {"ok": "#4c78a8", "zero": "#f58518", "missing": "#e45756", "frozen": "#9d9d9d"}

Figures = list[go.Figure]


def _look() -> go.layout.Template:
    """plotly's default look (grey plot area, white grid) without what makes a page of figures slow: the
    default template's per-trace defaults (4 kB of JSON in every figure) and its automatic axis margins."""
    plotly = pio.templates["plotly"].layout
    axis = {"gridcolor": "white", "linecolor": "white", "ticks": "", "zerolinecolor": "white", "zerolinewidth": 2,
            "automargin": False}
    return go.layout.Template(layout={
        "colorway": plotly.colorway, "font": plotly.font, "hovermode": "closest", "hoverlabel": plotly.hoverlabel,
        "paper_bgcolor": "white", "plot_bgcolor": plotly.plot_bgcolor, "title": {"x": 0.05},
        "annotationdefaults": plotly.annotationdefaults, "shapedefaults": plotly.shapedefaults,
        "xaxis": axis, "yaxis": axis})


LOOK = _look()
MARGIN = {"l": 40, "r": 20, "t": 50, "b": 30}
COLOUR_BAR_MARGIN = 80  # the right margin a colour bar is drawn in
AXIS_TITLES = {"l": 60, "b": 45}  # room for axis titles beside the tick labels


# ------------------------------------------------------------------ helpers
def _finish(fig: go.Figure, title: str, height: int = 320, margin: Optional[dict[str, int]] = None) -> go.Figure:
    """Title, height and fixed margins (``MARGIN`` updated by ``margin``). Margins do not grow to fit colour
    bars, legends or tick labels (that costs the browser a second layout pass per figure): a figure with a
    colour bar gets ``COLOUR_BAR_MARGIN`` on the right, and a figure whose labels are data (layer names,
    tokens) asks for ``margin={'autoexpand': True}``."""
    colour_bar = any(getattr(trace, "showscale", None) is not False and isinstance(trace, go.Heatmap)
                     for trace in fig.data)
    margin = {**MARGIN, **({"r": COLOUR_BAR_MARGIN} if colour_bar else {}), "autoexpand": False, **(margin or {})}
    fig.update_layout(template=LOOK, title={"text": title, "font": {"size": 14}}, height=height, margin=margin)
    return fig


def _shrink(z: np.ndarray, max_side: int = MAX_SIDE) -> np.ndarray:
    """Block-average a 2-D array so no side exceeds ``max_side`` (large maps stay cheap to draw)."""
    z = np.asarray(z, dtype=np.float64)
    factors = [max(1, math.ceil(side / max_side)) for side in z.shape]
    if factors == [1, 1]:
        return z
    padded = np.pad(z, [(0, (-side) % f) for side, f in zip(z.shape, factors)], constant_values=np.nan)
    blocks = padded.reshape(padded.shape[0] // factors[0], factors[0], padded.shape[1] // factors[1], factors[1])
    with np.errstate(invalid="ignore"):
        return np.nanmean(blocks, axis=(1, 3))


def title_number(value: Any) -> str:
    """A number as every figure title and caption gives it: 4 significant digits (``0.3730``: a float printed to
    17 digits hides its size), an integer whole, ``n/a`` for a missing value or NaN."""
    if isinstance(value, (bool, np.bool_)):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "n/a" if value is None else str(value)
    return "n/a" if math.isnan(number) else f"{number:.4g}"


def colour_bar(unit: str) -> dict[str, Any]:
    """A colour bar titled with what its colours measure (``activation``, ``share of max``): plotly draws it beside
    a graph, ``pictures`` beside or under a picture."""
    return {"title": {"text": unit, "side": "right"}}


def colour_unit(trace: Any) -> str:
    """What a heatmap's colours measure (its colour bar's title), '' where the figure does not say."""
    colorbar = getattr(trace, "colorbar", None)
    return str(colorbar.title.text or "") if colorbar is not None and colorbar.title is not None else ""


def _heatmap(z: np.ndarray, unit: str = "value", **kwargs: Any) -> go.Heatmap:
    return go.Heatmap(z=_shrink(z), colorscale=kwargs.pop("colorscale", "Viridis"), colorbar=colour_bar(unit),
                      **kwargs)


def _image_axes(fig: go.Figure) -> None:
    """Rows top to bottom and square pixels in every panel, as an image is drawn: the figure is a picture
    (``is_picture``)."""
    fig.update_layout(meta={**(fig.layout.meta or {}), "picture": True})
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.for_each_xaxis(lambda axis: axis.update(scaleanchor=axis.anchor or "y", constrain="domain",
                                                showticklabels=False))


def _grid(maps: list[np.ndarray], titles: list[str], title: str, unit: str = "value") -> go.Figure:
    """Maps tiled into one image with gaps, on one colour scale (titled ``unit``) so magnitudes compare.

    A single heatmap trace draws in a few milliseconds, where one subplot per map
    costs hundreds. ``layout.meta['tiles']`` holds each map's ``[row, col, h, w]``
    in the mosaic (see ``grid_tile``); the mosaic is a picture (``is_picture``).
    """
    mosaic, tiles, labels = _tiled([_shrink(m) for m in maps], titles)
    fig = go.Figure(go.Heatmap(z=mosaic, colorscale="Viridis", hoverongaps=False, colorbar=colour_bar(unit)))
    fig.update_layout(annotations=labels, meta={"tiles": tiles, "picture": True}, plot_bgcolor="white")
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False, scaleanchor="y", constrain="domain")
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False, autorange="reversed", constrain="domain",
                     constraintoward="top")  # no blank rows between the maps and their tick labels in narrow columns
    return _finish(fig, title, height=120 + 170 * math.ceil(len(maps) / 4))


def _tiled(maps: list[np.ndarray], titles: list[str], row_gap: Optional[int] = None) -> tuple[np.ndarray, list, list]:
    """The mosaic of ``maps`` (4 a row, NaN between them), each map's ``[row, col, h, w]`` in it and its caption
    (an annotation just above it). ``row_gap`` cells between rows of maps (default: the gap between columns)."""
    height, width = max(m.shape[0] for m in maps), max(m.shape[1] for m in maps)
    cols = min(len(maps), 4)
    rows = math.ceil(len(maps) / cols)
    gap = max(1, round(max(height, width) / 6))
    row_gap = gap if row_gap is None else row_gap
    mosaic = np.full((rows * (height + row_gap) - row_gap, cols * (width + gap) - gap), np.nan)
    tiles, labels = [], []
    for i, (z, text) in enumerate(zip(maps, titles)):
        top, left = (i // cols) * (height + row_gap), (i % cols) * (width + gap)
        mosaic[top:top + z.shape[0], left:left + z.shape[1]] = z
        tiles.append([top, left, z.shape[0], z.shape[1]])
        labels.append({"x": left + (z.shape[1] - 1) / 2, "y": top - 0.5, "text": text, "showarrow": False,
                       "yanchor": "bottom", "font": {"size": 10}, "xref": "x", "yref": "y"})
    return mosaic, tiles, labels


def with_caption_rows(fig: go.Figure) -> go.Figure:
    """A ``_grid`` mosaic retiled with rows of maps 0.6 of a map's height apart (the same maps, captions and colour
    scale): drawn narrow (a column of a comparison), the gap between columns leaves its captions too few pixels,
    and they would cover the maps above them."""
    tiles = fig.layout.meta["tiles"]
    maps = [grid_tile(fig, i) for i in range(len(tiles))]
    row_gap = max(2, math.ceil(0.6 * max(height for _, _, height, _ in tiles)))
    mosaic, tiles, labels = _tiled(maps, [str(note.text) for note in fig.layout.annotations], row_gap)
    fig.update_traces(z=mosaic, selector={"type": "heatmap"})
    fig.update_layout(annotations=labels, meta={**fig.layout.meta, "tiles": tiles})
    return fig


def grid_tile(fig: go.Figure, i: int) -> np.ndarray:
    """The ``i``-th map of a ``_grid`` figure, as drawn."""
    top, left, height, width = fig.layout.meta["tiles"][i]
    return np.asarray(fig.data[0].z)[top:top + height, left:left + width]


def _table(rows: list[tuple[str, Any]], title: str, header: tuple[str, str] = ("name", "value"),
           fill: Optional[list[str]] = None) -> go.Figure:
    """A two-column table exactly as tall as its rows (up to ``MAX_TABLE_ROWS``; more scroll): no blank gap."""
    cells = {"values": [[name for name, _ in rows], [_format(value) for _, value in rows]], "align": "left",
             "height": TABLE_ROW_PX}
    if fill is not None:
        cells["fill"] = {"color": [fill, fill]}
    fig = go.Figure(go.Table(header={"values": list(header), "align": "left", "height": TABLE_ROW_PX},
                             cells=cells))
    fig = _finish(fig, title, height=table_height(min(len(rows), MAX_TABLE_ROWS)))
    fig.update_layout(margin={"b": 4})
    return fig


def table_height(rows: int) -> int:
    """Pixels of a ``_table`` figure showing ``rows`` rows: the title margin, the header, the rows, 4 px below."""
    return 50 + TABLE_ROW_PX * (rows + 1) + 4 + 2


def _format(value: Any) -> str:
    if isinstance(value, (float, np.floating)):
        return f"{value:.6g}"
    if isinstance(value, np.ndarray):
        return np.array2string(value, precision=4, threshold=8)
    return str(value)


def display_image(image: np.ndarray) -> np.ndarray:
    """An image given as (3, H, W), (H, W, 3), (1, H, W) or (H, W) as (H, W, 3) uint8, min-max normalised."""
    image = np.asarray(image, dtype=np.float64)
    if image.ndim == 3 and image.shape[0] in (1, 3) and image.shape[-1] not in (1, 3):
        image = image.transpose(1, 2, 0)
    if image.ndim == 2:
        image = image[:, :, None]
    if image.ndim != 3 or image.shape[2] not in (1, 3):
        raise ValueError(f"an image must be (3, H, W), (H, W, 3) or (H, W), got shape {image.shape}")
    image = np.repeat(image, 3, axis=2) if image.shape[2] == 1 else image
    low, high = np.nanmin(image), np.nanmax(image)
    scaled = (image - low) / (high - low) if high > low else np.zeros_like(image)
    return (np.nan_to_num(scaled) * 255).round().astype(np.uint8)


def png_data_uri(image: np.ndarray) -> str:
    """An (H, W, 3) or (H, W) uint8 image as a ``data:image/png;base64,...`` URI: a browser shows it as an
    ``<img>`` (or an SVG ``<image>``), with no plotly graph to draw."""
    buffer = io.BytesIO()
    PIL.Image.fromarray(np.ascontiguousarray(image)).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def pca_rgb(features: np.ndarray) -> np.ndarray:
    """(C, H, W) features as an (H, W, 3) uint8 image of their top-3 principal components.

    Each pixel is a sample of C features; components are found with an SVD of the
    centred (H*W, C) matrix and each one is min-max scaled to a colour channel.
    """
    channels, height, width = features.shape
    samples = np.nan_to_num(np.asarray(features, dtype=np.float64).reshape(channels, -1).T)
    samples -= samples.mean(axis=0)
    _, _, vt = np.linalg.svd(samples, full_matrices=False)
    projected = samples @ vt[:3].T
    projected = np.pad(projected, [(0, 0), (0, 3 - projected.shape[1])])
    low, high = projected.min(axis=0), projected.max(axis=0)
    scaled = np.where(high > low, (projected - low) / np.where(high > low, high - low, 1), 0.0)
    return (scaled.reshape(height, width, 3) * 255).round().astype(np.uint8)


# -------------------------------------------------------------- by kind
def feature_map_figures(output: dict[str, Any], channels: Optional[list[int]] = None) -> Figures:
    """The strongest channels (highest mean activation) of one datapoint's feature map, as a grid; or the
    channel indices ``channels``, in that order (the same channels in every column of a comparison)."""
    fmap = np.asarray(output["feature_map"], dtype=np.float64)
    indices = np.asarray(output.get("channel_indices", np.arange(fmap.shape[0])))
    if channels is None:
        order = list(np.argsort(-np.nanmean(fmap, axis=(1, 2)), kind="stable")[:MAX_PANELS])
        chosen = f"{len(order)} strongest channels"
    else:
        position = {int(index): i for i, index in enumerate(indices)}
        order = [position[channel] for channel in channels if channel in position]
        chosen = f"{len(order)} channels, the same in every column"
    stats = output.get("stats", {})
    title = f"{output.get('layer_name', '')} feature map {output.get('shape', list(fmap.shape))}: " \
            f"{chosen} (mean {title_number(stats.get('mean', np.nan))})"
    return [_grid([fmap[i] for i in order], [f"ch {int(indices[i])}" for i in order], title, "activation")]


def statistics_figures(output: dict[str, Any]) -> Figures:
    """The scalar statistics as a table, the activation histogram, the channel means."""
    skip = {"kind", "layer_name", "histogram", "histogram_edges", "sample_values", "channel_means", "channel_stds"}
    rows = [(key, value) for key, value in output.items() if key not in skip]
    figures = [_table(rows, f"{output.get('layer_name', '')} activation statistics", ("statistic", "value"))]
    if "histogram" in output:
        figures.append(histogram_figure(output["histogram"], output["histogram_edges"],
                                        f"{output.get('layer_name', '')} activation histogram"))
    if "channel_means" in output:
        means = np.asarray(output["channel_means"], dtype=np.float64)
        stds = np.asarray(output.get("channel_stds", np.zeros_like(means)), dtype=np.float64)
        fig = go.Figure(go.Bar(x=np.arange(len(means)), y=means, error_y={"type": "data", "array": stds}))
        fig.update_xaxes(title_text="channel")
        figures.append(_finish(fig, f"{output.get('layer_name', '')} channel means (± std)", 280, AXIS_TITLES))
    return figures


def histogram_figure(counts: np.ndarray, edges: np.ndarray, title: str) -> go.Figure:
    """A precomputed histogram: one bar per bin, spanning its edges."""
    edges = np.asarray(edges, dtype=np.float64)
    fig = go.Figure(go.Bar(x=(edges[:-1] + edges[1:]) / 2, y=np.asarray(counts), width=np.diff(edges),
                           marker_line_width=0))
    fig.update_xaxes(title_text="activation")
    fig.update_yaxes(title_text="count")
    return _finish(fig, title, 280, AXIS_TITLES)


def layer_output_figures(output: dict[str, Any]) -> Figures:
    """The pooled layer output: a grid of channels for maps, a heatmap for matrices, bars for vectors."""
    title = f"{output.get('layer_name', '')} output {output.get('original_shape', '')}, " \
            f"pooled ×{output.get('downsample_factor', 1)}"
    return array_figures(np.asarray(output["output"]), title, "activation")


def attention_figures(output: dict[str, Any], image: Optional[np.ndarray] = None,
                      tokens: Optional[list[str]] = None) -> Figures:
    """One heatmap per head (queries down, keys across, axes labelled by token index or string); over the
    input image, how much attention each patch gets; the entropy of each head beside the uniform level."""
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
    return _finish(fig, f"{name} attention entropy per head (uniform = {title_number(uniform)})", 260, AXIS_TITLES)


def attention_heads_figure(attention: np.ndarray, title: str, tokens: Optional[list[str]] = None) -> go.Figure:
    """The heads as a grid of (query, key) maps, both axes labelled in every tile: token indices, or the
    token strings where the datapoint gives one per key and query."""
    heads = attention.reshape(-1, *attention.shape[-2:])[:MAX_HEADS]
    fig = _grid(list(heads), [f"head {h}" for h in range(len(heads))], title, "attention weight")
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

    The keys are patches on ``grid`` (from the capture point) after ``keys - h*w`` special tokens, or,
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


def _stretched_over(picture: np.ndarray, heat: np.ndarray) -> dict[str, float]:
    """Heatmap arguments that stretch ``heat`` (h, w) over ``picture`` at 45 % opacity."""
    scale = (picture.shape[1] / heat.shape[1], picture.shape[0] / heat.shape[0])
    return {"opacity": 0.45, "x0": (scale[0] - 1) / 2, "dx": scale[0], "y0": (scale[1] - 1) / 2, "dy": scale[1]}


def _overlay(heat: np.ndarray, image: np.ndarray, title: str) -> go.Figure:
    """``heat`` (h, w) stretched over ``image``, as Grad-CAM is drawn."""
    picture = display_image(image)
    fig = go.Figure([go.Image(z=picture, hoverinfo="skip"),
                     go.Heatmap(z=heat, colorscale="Jet", colorbar=colour_bar("attention weight"),
                                **_stretched_over(picture, heat),
                                hovertemplate="patch row %{y:.0f}, col %{x:.0f}: %{z:.3f}<extra></extra>")])
    _image_axes(fig)
    return _finish(fig, title, 360)


def cam_figures(output: dict[str, Any], image: Optional[np.ndarray] = None,
                class_names: Optional[dict[int, str]] = None) -> Figures:
    """The Grad-CAM heatmap over the input image when it is given; beside it, where the label and the
    prediction differ, the cam of the other one (``other_target``), each titled by role and class name."""
    panels = [(output["cam"], int(output.get("target_class", -1)), output.get("raw_max"))]
    other = output.get("other_target")
    if isinstance(other, dict):
        panels.append((other["cam"], int(other["target_class"]), other.get("raw_max")))
    if output.get("label_class") is not None and output.get("predicted_class") is not None:
        panels.sort(key=lambda panel: panel[1] != int(output["label_class"]))  # the label's cam first
    fig = go.Figure()
    picture = display_image(image) if image is not None else None
    annotations = []
    for i, (cam, target, _) in enumerate(panels):
        axes = {"xaxis": "x" if i == 0 else f"x{i + 1}", "yaxis": "y" if i == 0 else f"y{i + 1}"}
        cam = np.atleast_2d(np.asarray(cam, dtype=np.float64))  # a signal's or a sequence's cam: one row
        heat = {"zmin": 0.0, "zmax": 1.0, "colorscale": "Jet", "showscale": i == len(panels) - 1,
                "colorbar": colour_bar("share of max"), **axes}
        if picture is not None:
            fig.add_trace(go.Image(z=picture, hoverinfo="skip", **axes))
            heat.update(_stretched_over(picture, cam))
        fig.add_trace(go.Heatmap(z=cam, hovertemplate="x %{x:.0f}, y %{y:.0f}: %{z:.2f}<extra></extra>", **heat))
        annotations.append({"text": cam_title(output, target, class_names),
                            "x": 0.5, "y": 1.0, "xref": f"{axes['xaxis']} domain", "yref": f"{axes['yaxis']} domain",
                            "yanchor": "bottom", "showarrow": False, "font": {"size": 12}})
    width = 1 / len(panels)
    for i in range(len(panels)):
        suffix = "" if i == 0 else str(i + 1)
        fig.layout[f"xaxis{suffix}"] = {"domain": [i * width + 0.02, (i + 1) * width - 0.02], "anchor": f"y{suffix}"}
        fig.layout[f"yaxis{suffix}"] = {"domain": [0, 0.92], "anchor": f"x{suffix}"}
    fig.update_layout(annotations=annotations)
    _image_axes(fig)
    return [_finish(fig, f"Grad-CAM at {output.get('target_layer', '')} {cam_scale_note(panels)}", 380)]


def cam_scale_note(panels: list[tuple]) -> str:
    """What a cam's colours are: each map divided by its own maximum (the class's strongest positive evidence,
    given to 4 significant digits); a maximum of 0 is a map with no positive evidence for its class, drawn empty."""
    maxima = [raw_max for _, _, raw_max in panels if raw_max is not None]
    if not maxima:
        return ""
    shown = " / ".join("0: no positive evidence" if not raw_max else title_number(raw_max) for raw_max in maxima)
    return f"(each map as a share of its maximum, {shown})"


def cam_title(output: dict[str, Any], target: int, class_names: Optional[dict[int, str]] = None) -> str:
    """``'label: cat'``, ``'prediction: dog'``, ``'label and prediction: cat'``, ``'class 4: ring'`` (a target that is
    neither) or, where the run names no classes, ``'label: class 4'`` and ``'class 4'``."""
    roles = [role for role, key in (("label", "label_class"), ("prediction", "predicted_class"))
             if output.get(key) is not None and int(output[key]) == target]
    name = (class_names or {}).get(int(target))
    if not roles:
        return f"class {target}" + (f": {name}" if name is not None else "")
    return f"{' and '.join(roles)}: {name if name is not None else f'class {target}'}"


def nan_origin_figures(output: dict[str, Any]) -> Figures:
    """The modules whose output held NaN/Inf, in execution order, the first one highlighted."""
    bad = list(output.get("bad_modules") or [])
    if not bad:
        return [_table([("result", f"no NaN or Inf in any module output "
                                   f"({output.get('modules_checked', '?')} module calls checked)")],
                       "NaN/Inf origin")]
    origin = f"first NaN/Inf ({output.get('module_type')}), input range " \
             f"[{_format(output.get('input_min'))}, {_format(output.get('input_max'))}]"
    rows = [(name, origin if i == 0 else "NaN/Inf in output") for i, name in enumerate(bad)]
    fill = ["#f8d7da"] + ["white"] * (len(bad) - 1)
    return [_table(rows, f"NaN/Inf origin: {bad[0]}", ("module (execution order)", "finding"), fill)]


def gradient_flow_figures(output: dict[str, Any]) -> Figures:
    """Gradient norm per layer (log scale), layers with missing, zero or frozen gradients coloured."""
    layers = list(output["layers"])
    norms = np.asarray(output["grad_norms"], dtype=np.float64)
    flags = [_flag(output, i) for i in range(len(layers))]
    positive = norms[norms > 0]
    floor = positive.min() / 10 if positive.size else 1e-12  # flagged layers get a stub bar on the log axis
    fig = go.Figure()
    for flag, colour in FLAG_COLOURS.items():
        rows = [i for i, f in enumerate(flags) if f == flag]
        if rows:
            fig.add_trace(go.Bar(x=[layers[i] for i in rows], y=[max(norms[i], floor) for i in rows], name=flag,
                                 marker_color=colour, customdata=norms[rows],
                                 hovertemplate="%{x}: %{customdata:.3g}<extra>" + flag + "</extra>"))
    fig.update_xaxes(categoryorder="array", categoryarray=layers, automargin=True)  # layer names: room to fit
    drawn = np.maximum(norms, floor)
    ticks = log_ticks(float(drawn.min()), float(drawn.max())) if drawn.size else []
    fig.update_yaxes(type="log", title_text="gradient norm", tickvals=ticks, ticktext=[f"{t:g}" for t in ticks],
                     automargin=True)
    loss = output.get("loss")
    return [_finish(fig, "gradient flow" + (f" (loss {title_number(loss)})" if loss is not None else ""), 340,
                    {**AXIS_TITLES, "autoexpand": True})]  # layer names and the legend: margins fit them


def log_ticks(low: float, high: float) -> list[float]:
    """Labelled ticks of a log axis from ``low`` to ``high``: 1, 2 and 5 times each power of ten within a range
    of up to two decades, powers of ten (at most 8 of them) beyond: never every minor tick."""
    low, high = max(low, 1e-300), max(high, low)
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    steps = (1,) if last - first > 2 else (1, 2, 5)
    stride = max(1, math.ceil((last - first + 1) / 8))
    ticks = [m * 10.0 ** e for e in range(first, last + 1, stride) for m in steps]
    inside = [t for t in ticks if low <= t <= high]
    return inside if len(inside) >= 2 else sorted({float(f"{low:.2g}"), float(f"{high:.2g}")})


def _flag(output: dict[str, Any], i: int) -> str:
    for flag in ("frozen", "missing", "zero"):
        values = output.get(flag)
        if values is not None and bool(np.asarray(values)[i]):
            return flag
    return "ok"


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


def is_picture(fig: go.Figure) -> bool:
    """Whether the figure is a picture of maps (``layout.meta['picture']``): looked at, not read value by value,
    so a viewer may draw it as images without hover values (``data.viewer.layout.display.pictures``)."""
    return isinstance(fig.layout.meta, dict) and bool(fig.layout.meta.get("picture"))


def is_shared(fig: go.Figure) -> bool:
    """Whether the figure draws data that is the same for every datapoint (see ``captured_states_figures``)."""
    return isinstance(fig.layout.meta, dict) and bool(fig.layout.meta.get("shared"))


def captured_state_figures(record: dict[str, Any], title: str) -> Figures:
    """One state ``{'kind', 'data', 'metadata'}``."""
    data, metadata = record.get("data"), record.get("metadata") or {}
    if not isinstance(data, np.ndarray):
        return generic_figures(data, title)
    kind = record.get("kind")
    if kind == kinds.KIND_ATTENTION and data.ndim >= 2:
        return [attention_heads_figure(data.astype(np.float64), title)]
    if kind in (kinds.KIND_EMBEDDING, kinds.KIND_POSITION_ENCODING):
        return embedding_figures(data, metadata, title)
    return array_figures(data, title)


def embedding_figures(data: np.ndarray, metadata: dict[str, Any], title: str) -> Figures:
    """A (C, H, W) map, or (N, D) tokens on ``metadata['grid']``, as a PCA RGB image (and tokens as a heatmap)."""
    figures: Figures = []
    grid = metadata.get("grid")
    if data.ndim == 2:
        fig = go.Figure(_heatmap(data, colorscale="RdBu"))
        fig.update_xaxes(title_text="channel")
        fig.update_yaxes(title_text="token", autorange="reversed")
        figures.append(_finish(fig, f"{title} {list(data.shape)}", margin=AXIS_TITLES))
        if grid is not None and len(grid) == 2 and grid[0] * grid[1] == data.shape[0]:
            data = data.T.reshape(data.shape[1], int(grid[0]), int(grid[1]))
    if data.ndim == 3:
        fig = go.Figure(go.Image(z=pca_rgb(data)))
        _image_axes(fig)
        figures.insert(0, _finish(fig, f"{title}: top-3 principal components as RGB", 320))
    return figures or array_figures(data, title)


# --------------------------------------------------------------- generic
def array_figures(array: np.ndarray, title: str, unit: str = "value") -> Figures:
    """Any array: bars (short vectors), a histogram (long ones), a heatmap, or a grid of 2-D slices; ``unit`` is what
    its values are (a colour bar's title)."""
    array = np.asarray(array)
    if array.dtype.kind not in "biuf":
        return [_table([("value", array)], title)]
    array = array.astype(np.float64)
    if array.size == 0:
        return [_table([("value", f"empty array of shape {list(array.shape)}")], title)]
    if array.ndim == 0:
        return [_table([("value", float(array))], title)]
    if array.ndim == 1:
        trace = go.Bar(y=array) if array.size <= 64 else go.Histogram(x=array[np.isfinite(array)])
        return [_finish(go.Figure(trace), f"{title} {list(array.shape)}", 260)]
    if array.ndim == 2:
        fig = go.Figure(_heatmap(array, unit))
        fig.update_yaxes(autorange="reversed")
        return [_finish(fig, f"{title} {list(array.shape)}")]
    slices = array.reshape(-1, *array.shape[-2:])
    return [_grid(list(slices[:MAX_PANELS]), [f"[{i}]" for i in range(min(len(slices), MAX_PANELS))],
                  f"{title} {list(array.shape)}: first {min(len(slices), MAX_PANELS)} of {len(slices)} maps", unit)]


def generic_figures(value: Any, title: str = "output") -> Figures:
    """Outputs without a known kind: numbers in one table, every array in its own figure."""
    scalars: list[tuple[str, Any]] = []
    arrays: list[tuple[str, np.ndarray]] = []
    _collect(value, title, scalars, arrays)
    figures = [_table(scalars, title)] if scalars else []
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


# -------------------------------------------------------------- dispatch
_BY_KIND: dict[str, Callable[[dict[str, Any]], Figures]] = {
    kinds.KIND_FEATURE_MAP: feature_map_figures,
    kinds.KIND_STATISTICS: statistics_figures,
    kinds.KIND_LAYER_OUTPUT: layer_output_figures,
    kinds.KIND_NAN_ORIGIN: nan_origin_figures,
    kinds.KIND_GRADIENT_FLOW: gradient_flow_figures,
    kinds.KIND_CAPTURED_STATES: captured_states_figures,
}


def figures_for_output(output: Any, image: Optional[np.ndarray] = None,
                       class_names: Optional[dict[int, str]] = None, tokens: Optional[list[str]] = None) -> Figures:
    """Figures for one datapoint's output of one debugger; ``image`` (its input image) is drawn under CAMs
    and patch attention, ``class_names`` (class index -> name, from the run's epoch table) name the classes
    in titles, ``tokens`` (one string per token) label attention axes.

    Error and not-run records give no figure (the viewer shows them as alerts);
    outputs without a known ``'kind'`` get a generic rendering.
    """
    kind = output.get("kind") if isinstance(output, dict) else None
    if kind in (kinds.KIND_ERROR, kinds.KIND_NOT_RUN):
        return []
    if kind == kinds.KIND_CAM:
        return cam_figures(output, image, class_names)
    if kind == kinds.KIND_ATTENTION:
        return attention_figures(output, image, tokens)
    if kind in _BY_KIND:
        return _BY_KIND[kind](output)
    return generic_figures(output)


def model_report_figures(report: dict[str, Any]) -> Figures:
    """The model report: totals (and where a failing forward stopped), a per-layer table with output shapes, where
    parameters and FLOPs go, every module's input and output shapes, and the first conv layers' filters."""
    params = report.get("parameters", {})
    summary = [("model", report.get("model")), ("parameters", params.get("total")),
               ("trainable", params.get("trainable")), ("frozen", params.get("frozen")),
               (f"FLOPs of one forward (batch {report.get('batch_size')})", report.get("total_flops"))]
    if report.get("flops_error"):
        summary.append(("FLOPs not counted", report["flops_error"]))
    failed = report.get("failed_module")
    if isinstance(failed, dict):
        summary.append(("the forward failed inside", f"{failed.get('name')} ({failed.get('type')}: "
                                                       f"{failed.get('module')}), inputs {failed.get('input_shapes')}"))
    layers = report.get("layers", [])
    columns = ("name", "type", "parameters", "trainable", "flops", "output_shape", "output_dtype")
    table = go.Figure(go.Table(
        header={"values": ["layer", "type", "parameters", "trainable", "FLOPs", "output shape", "dtype"],
                "align": "left"},
        cells={"values": [[_cell(layer.get(k)) for layer in layers] for k in columns], "align": "left"}))
    bars = make_subplots(rows=1, cols=2, subplot_titles=["parameters per layer", "FLOPs per layer"])
    names = [layer.get("name") for layer in layers]
    bars.add_trace(go.Bar(x=names, y=[layer.get("parameters") for layer in layers], name="parameters"), 1, 1)
    bars.add_trace(go.Bar(x=names, y=[layer.get("flops") for layer in layers], name="FLOPs"), 1, 2)
    bars.update_layout(showlegend=False)
    bars.update_xaxes(automargin=True)  # layer names
    figures = [_table(summary, f"model report: {report.get('model')}", ("", "")),
               _finish(table, "layers", min(120 + 26 * len(layers), 700)),
               _finish(bars, "parameters and FLOPs", 360, {"autoexpand": True})]
    shapes = report.get("module_shapes")
    if isinstance(shapes, list) and shapes:
        figures.append(module_shapes_figure([entry for entry in shapes if isinstance(entry, dict)]))
    return figures + conv_filter_figures(report)


def module_shapes_figure(modules: list[dict[str, Any]]) -> go.Figure:
    """Every module of the report's forward pass, in the order they finished: input and output shapes, dtypes."""
    columns = ("name", "type", "input_shapes", "output_shapes", "output_dtypes", "calls")
    table = go.Figure(go.Table(
        header={"values": ["module", "type", "input shapes", "output shapes", "dtypes", "calls"], "align": "left"},
        cells={"values": [[_cell(module.get(k)) for module in modules] for k in columns], "align": "left"}))
    return _finish(table, "input and output shapes of every module, in the order they ran",
                   min(120 + 26 * len(modules), 700))


def _cell(value: Any) -> Any:
    """A table cell: numbers as they are, lists (shapes) as text, nothing for None."""
    return "" if value is None else str(value) if isinstance(value, (list, tuple, dict)) else value


def conv_filter_figures(report: dict[str, Any]) -> Figures:
    """Each reported conv layer's filters as a 4-column grid, as the PyTorch chapter's ``visualize_conv_filters``
    draws them: RGB pictures for a layer reading 3 channels (min-max scaled over the layer), else input channel
    0 as heatmaps on one colour scale. An entry that is not such filters is named, not drawn."""
    figures = []
    for entry in report.get("conv_filters") or []:
        layer = entry.get("layer") if isinstance(entry, dict) else None
        try:
            filters = np.asarray(entry["filters"], dtype=np.float64)[:MAX_PANELS]
            rgb = bool(entry.get("rgb"))
            if filters.ndim != (4 if rgb else 3) or (rgb and filters.shape[1] != 3) or not filters.size:
                raise ValueError(f"filters of shape {filters.shape}")
        except (KeyError, TypeError, ValueError) as exc:
            figures.append(_table([("layer", layer), ("cannot be drawn", str(exc))], "conv filters"))
            continue
        title = (f"{layer} filters {entry.get('weight_shape')} at {report.get('conv_filters_at', '?')}"
                 + (" (RGB)" if rgb else " (input channel 0)"))
        titles = [f"filter {i}" for i in range(len(filters))]
        figures.append(_rgb_grid(filters, titles, title) if rgb else _grid(list(filters), titles, title, "weight"))
    return figures


def _rgb_grid(filters: np.ndarray, titles: list[str], title: str) -> go.Figure:
    """(n, 3, kh, kw) filters tiled as one RGB picture, scaled together to [0, 255], white between them."""
    low, high = np.nanmin(filters), np.nanmax(filters)
    scaled = (filters - low) / (high - low) if high > low else np.zeros_like(filters)
    channels = [_tiled(list(scaled[:, c]), titles)[0] for c in range(3)]
    _, tiles, labels = _tiled(list(scaled[:, 0]), titles)
    picture = np.nan_to_num(np.stack(channels, axis=-1), nan=1.0)
    fig = go.Figure(go.Image(z=(picture * 255).round().astype(np.uint8)))
    fig.update_layout(annotations=labels, meta={"tiles": tiles})
    _image_axes(fig)
    return _finish(fig, title, height=120 + 170 * math.ceil(len(filters) / 4))


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
    fig = _grid([m for m, _ in averaged], [t for _, t in averaged],
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
