"""What every figure of a debug output is drawn with: one look, fixed margins, mosaics of maps on one colour scale,
tables as tall as their rows, images and their PCA colours.

Figures are kept light because a viewer page shows many: at most ``MAX_PANELS`` channels or heads, heatmaps
block-averaged to at most ``MAX_SIDE`` cells a side, margins that never grow (a second layout pass per figure).
"""

from __future__ import annotations

import base64
import io
import math
from typing import Any, Optional

import numpy as np
import PIL.Image
import plotly.colors
import plotly.graph_objects as go
import plotly.io as pio

MAX_PANELS = 16
MAX_SIDE = 128
MAX_TABLE_ROWS = 24
TABLE_ROW_PX = 24
SHARED = "shared by every datapoint"

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
LOOK_JSON = LOOK.to_plotly_json()
MARGIN = {"l": 40, "r": 20, "t": 50, "b": 30}
COLOUR_BAR_MARGIN = 80  # the right margin a colour bar is drawn in
AXIS_TITLES = {"l": 60, "b": 45}  # room for axis titles beside the tick labels


def finish(fig: go.Figure, title: str, height: int = 320, margin: Optional[dict[str, int]] = None) -> go.Figure:
    """``finished`` for a figure built by plotly's methods: rebuilt from its dicts in one step (``plain_figure``),
    as an ``update_layout`` costs a few milliseconds, many of them per click."""
    return finished([trace.to_plotly_json() for trace in fig.data], fig.layout.to_plotly_json(), title, height,
                    margin)  # the traces' own dicts keep their arrays (the figure's would be base64 text)


def finished(data: list[dict[str, Any]], layout: dict[str, Any], title: str, height: int = 320,
             margin: Optional[dict[str, int]] = None) -> go.Figure:
    """The figure of ``data`` and ``layout`` with its title, height and fixed margins (``MARGIN`` updated by
    ``margin``). Margins do not grow to fit colour bars, legends or tick labels (that costs the browser a second
    layout pass per figure): a figure with a colour bar gets ``COLOUR_BAR_MARGIN`` on the right, and a figure whose
    labels are data (layer names, tokens) asks for ``margin={'autoexpand': True}``."""
    colour_bar = any(trace.get("type") == "heatmap" and trace.get("showscale") is not False for trace in data)
    margin = {**layout.get("margin", {}), **MARGIN, **({"r": COLOUR_BAR_MARGIN} if colour_bar else {}),
              "autoexpand": False, **(margin or {})}
    old_title = layout.get("title", {})
    title = {**old_title, "text": title, "font": {**old_title.get("font", {}), "size": 14}}
    return plain_figure(data, {**layout, "title": title, "height": height, "margin": margin})


def plain_figure(data: list[dict[str, Any]], layout: dict[str, Any]) -> go.Figure:
    """A figure made from plain dicts in one step, in the viewer's look and unvalidated: plotly's validation and
    its per-call updates (``update_layout``, ``add_trace``) cost 5-15 ms a figure, most of a click's server time
    on a page of figures; one constructor call without validation costs well under one. The dicts must be what
    plotly would have validated: colour scales as lists of stops (``colour_scale``), not names."""
    return go.Figure({"data": data, "layout": {**layout, "template": LOOK_JSON}}, _validate=False)


def colour_scale(name: str) -> list[list]:
    """A named plotly colour scale as its stops (``[[0, '#440154'], ...]``), as validation would give them."""
    return [[position, colour] for position, colour in plotly.colors.get_colorscale(name)]


VIRIDIS, JET = colour_scale("Viridis"), colour_scale("Jet")


def _shrink(z: np.ndarray, max_side: int = MAX_SIDE) -> np.ndarray:
    """Block-average a 2-D array so no side exceeds ``max_side`` (large maps stay cheap to draw), as float32: what a
    model's states hold, and half the bytes of float64 in the page and the export (a segmentation datapoint's
    attention across layers was 430 kB of them)."""
    z = np.asarray(z, dtype=np.float64)
    factors = [max(1, math.ceil(side / max_side)) for side in z.shape]
    if factors == [1, 1]:
        return _float32(z)
    padded = np.pad(z, [(0, (-side) % f) for side, f in zip(z.shape, factors)], constant_values=np.nan)
    blocks = padded.reshape(padded.shape[0] // factors[0], factors[0], padded.shape[1] // factors[1], factors[1])
    with np.errstate(invalid="ignore"):
        return _float32(np.nanmean(blocks, axis=(1, 3)))


def _float32(z: np.ndarray) -> np.ndarray:
    """``z`` as float32, values past its range kept at its largest (a float64 blow-up stays a huge number)."""
    limit = np.finfo(np.float32).max
    return np.where(np.isfinite(z), np.clip(z, -limit, limit), z).astype(np.float32)


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


NARROW_BAR_MARGIN = 110  # the right margin that holds a narrow colour bar, its tick labels and its title


def narrow_colour_bar(unit: str) -> dict[str, Any]:
    """``colour_bar`` half as thick, for a figure with a right margin of ``NARROW_BAR_MARGIN``: plotly puts a colour
    bar a share of the plot's width past its right edge, so in a wide window a default one's labels leave the
    figure."""
    return {**colour_bar(unit), "thickness": 14}


def colour_unit(trace: Any) -> str:
    """What a heatmap's colours measure (its colour bar's title), '' where the figure does not say."""
    colorbar = getattr(trace, "colorbar", None)
    return str(colorbar.title.text or "") if colorbar is not None and colorbar.title is not None else ""


def heatmap(z: np.ndarray, unit: str = "value", **kwargs: Any) -> go.Heatmap:
    return go.Heatmap(z=_shrink(z), colorscale=kwargs.pop("colorscale", "Viridis"), colorbar=colour_bar(unit),
                      **kwargs)


def image_axes(fig: go.Figure) -> go.Figure:
    """Rows top to bottom and square pixels in every panel, as an image is drawn: the figure is a picture
    (``is_picture``). Set in one step on the figure's dict (``plain_figure``)."""
    layout = fig.layout.to_plotly_json()
    axes = {trace.xaxis or "x" for trace in fig.data}
    for x in axes:
        y = x.replace("x", "y")
        layout[_axis_key(x)] = {**layout.get(_axis_key(x), {}), "scaleanchor": y, "constrain": "domain",
                                "showticklabels": False}
        layout[_axis_key(y)] = {**layout.get(_axis_key(y), {}), "autorange": "reversed", "showticklabels": False}
    layout["meta"] = {**(layout.get("meta") or {}), "picture": True}
    return plain_figure([trace.to_plotly_json() for trace in fig.data], layout)


def _axis_key(axis: str) -> str:
    """The layout key of a trace's axis reference ('x2' -> 'xaxis2')."""
    return f"{axis[0]}axis{axis[1:]}"


IMAGE_AXIS = {"showticklabels": False, "showgrid": False, "zeroline": False, "constrain": "domain"}


def maps_figure(maps: list[np.ndarray], titles: list[str], title: str, unit: str = "value",
                columns: int = 4) -> go.Figure:
    """Maps tiled into one image with gaps, on one colour scale (titled ``unit``) so magnitudes compare.

    A single heatmap trace draws in a few milliseconds, where one subplot per map
    costs hundreds. ``layout.meta['tiles']`` holds each map's ``[row, col, h, w]``
    in the mosaic (see ``grid_tile``); the mosaic is a picture (``is_picture``).
    """
    mosaic, tiles, labels = shrunk_mosaic(maps, titles, columns)
    heat = {"type": "heatmap", "z": mosaic, "colorscale": VIRIDIS, "hoverongaps": False, "colorbar": colour_bar(unit)}
    layout = {"annotations": labels, "meta": {"tiles": tiles, "picture": True}, "plot_bgcolor": "white",
              "xaxis": {**IMAGE_AXIS, "scaleanchor": "y"},
              # no blank rows between the maps and their tick labels in narrow columns
              "yaxis": {**IMAGE_AXIS, "autorange": "reversed", "constraintoward": "top"}}
    return finished([heat], layout, title, height=120 + 170 * math.ceil(len(maps) / columns))


def shrunk_mosaic(maps: list[np.ndarray], titles: list[str], columns: int = 4) -> tuple[np.ndarray, list, list]:
    """``tiled`` of the maps block-averaged to at most ``MAX_SIDE`` a side."""
    return tiled([_shrink(m) for m in maps], titles, columns=columns)


def tiled(maps: list[np.ndarray], titles: list[str], row_gap: Optional[int] = None,
          columns: int = 4) -> tuple[np.ndarray, list, list]:
    """The mosaic of ``maps`` (``columns`` a row, NaN between them), each map's ``[row, col, h, w]`` in it and its
    caption (an annotation just above it). ``row_gap`` cells between rows of maps (default: the gap between
    columns)."""
    height, width = max(m.shape[0] for m in maps), max(m.shape[1] for m in maps)
    cols = min(len(maps), columns)
    rows = math.ceil(len(maps) / cols)
    gap = max(1, round(max(height, width) / 6))
    row_gap = gap if row_gap is None else row_gap
    mosaic = np.full((rows * (height + row_gap) - row_gap, cols * (width + gap) - gap), np.nan, dtype=np.float32)
    tiles, labels = [], []
    for i, (z, text) in enumerate(zip(maps, titles)):
        top, left = (i // cols) * (height + row_gap), (i % cols) * (width + gap)
        mosaic[top:top + z.shape[0], left:left + z.shape[1]] = z
        tiles.append([top, left, z.shape[0], z.shape[1]])
        labels.append({"x": left + (z.shape[1] - 1) / 2, "y": top - 0.5, "text": text, "showarrow": False,
                       "yanchor": "bottom", "font": {"size": 10}, "xref": "x", "yref": "y"})
    return mosaic, tiles, labels


FIGURE_PX = 828  # a figure's width in the Datapoint tab's column at a 1500 px window (the narrowest it is laid out)
PLOT_PX = 620  # ... and its plot area's, between the margins and the colour bar
CAPTION_PX_PER_CHAR = 6.2  # the average width of a character of an 11 px caption
TITLE_PX_PER_CHAR = 7.6  # ... of a 14 px title
CAPTION_LINES = 2


def fit_caption(text: str, pixels: float, px_per_char: float = CAPTION_PX_PER_CHAR) -> str:
    """``text`` on at most two lines of ``pixels`` each (broken after '.', '_', ':', ',' or a space; cut with '…'
    where even two lines are too few), so captions side by side never run into each other."""
    chars = max(4, int(pixels / px_per_char))
    lines, rest = [], text
    while len(rest) > chars and len(lines) < CAPTION_LINES - 1:
        cut = max(rest.rfind(mark, 0, chars) for mark in "._:, ")
        cut = cut + 1 if cut > 0 else chars
        lines.append(rest[:cut])
        rest = rest[cut:]
    lines.append(rest if len(rest) <= chars else rest[:chars - 1] + "…")
    return "<br>".join(lines)


def fit_title(title: str) -> str:
    """A figure's title on at most two lines that fit the narrowest figure (``FIGURE_PX`` less its left margin)."""
    return fit_caption(title, FIGURE_PX * 0.9, TITLE_PX_PER_CHAR)


def top_margin(title: str, captions: list[str]) -> int:
    """The top margin that holds ``title`` (centred on the margin's middle by plotly, lines going down) above
    ``captions`` (standing on the plot area's top edge), however many lines each has."""
    title_lines = title.count("<br>") + 1
    caption_lines = max((caption.count("<br>") + 1 for caption in captions), default=0)
    return max(60, 2 * (17 * (title_lines - 1) + 14 * caption_lines + 8) + 10)


def labelled_mosaic(rows: list[list[np.ndarray]], row_labels: list[str], column_labels: list[str],
                    scale: int = 1) -> tuple[np.ndarray, list[dict[str, Any]], tuple[int, int]]:
    """Maps of one shape (h, w) as a table: ``rows`` of maps, one NaN cell between tiles; each column captioned
    above, each row labelled at the left (annotations in data units times ``scale``, for a mosaic drawn over a
    picture ``scale`` times as fine); and a tile's (rows, cols) including its gap."""
    height, width = rows[0][0].shape
    tile = (height + 1, width + 1)
    columns = max(len(row) for row in rows)
    mosaic = np.full((len(rows) * tile[0] - 1, columns * tile[1] - 1), np.nan)
    for r, row in enumerate(rows):
        for c, values in enumerate(row):
            mosaic[r * tile[0]:r * tile[0] + height, c * tile[1]:c * tile[1] + width] = values
    caption_px = PLOT_PX / columns - 8
    labels = [{"x": (c * tile[1] + width / 2) * scale - 0.5, "y": -0.5, "text": fit_caption(text, caption_px),
               "showarrow": False, "yanchor": "bottom", "font": {"size": 11}, "xref": "x", "yref": "y"}
              for c, text in enumerate(column_labels)]
    labels += [{"x": -1, "y": (r * tile[0] + height / 2) * scale - 0.5, "text": text, "showarrow": False,
                "xanchor": "right", "font": {"size": 11}, "xref": "x", "yref": "y"}
               for r, text in enumerate(row_labels)]
    return mosaic, labels, tile


def with_caption_rows(fig: go.Figure) -> go.Figure:
    """A ``maps_figure`` mosaic retiled with rows of maps 0.6 of a map's height apart (the same maps, captions and
    colour scale): drawn narrow (a column of a comparison), the gap between columns leaves its captions too few pixels,
    and they would cover the maps above them."""
    tiles = fig.layout.meta["tiles"]
    maps = [grid_tile(fig, i) for i in range(len(tiles))]
    row_gap = max(2, math.ceil(0.6 * max(height for _, _, height, _ in tiles)))
    mosaic, tiles, labels = tiled(maps, [str(note.text) for note in fig.layout.annotations], row_gap)
    fig.update_traces(z=mosaic, selector={"type": "heatmap"})
    fig.update_layout(annotations=labels, meta={**fig.layout.meta, "tiles": tiles})
    return fig


def grid_tile(fig: go.Figure, i: int) -> np.ndarray:
    """The ``i``-th map of a ``maps_figure`` figure, as drawn."""
    top, left, height, width = fig.layout.meta["tiles"][i]
    return np.asarray(fig.data[0].z)[top:top + height, left:left + width]


def table_figure(rows: list[tuple[str, Any]], title: str, header: tuple[str, str] = ("name", "value"),
                 fill: Optional[list[str]] = None) -> go.Figure:
    """A two-column table exactly as tall as its rows (up to ``MAX_TABLE_ROWS``; more scroll): no blank gap."""
    cells = {"values": [[name for name, _ in rows], [format_value(value) for _, value in rows]], "align": "left",
             "height": TABLE_ROW_PX}
    if fill is not None:
        cells["fill"] = {"color": [fill, fill]}
    fig = go.Figure(go.Table(header={"values": list(header), "align": "left", "height": TABLE_ROW_PX},
                             cells=cells))
    fig = finish(fig, title, height=table_height(min(len(rows), MAX_TABLE_ROWS)))
    fig.update_layout(margin={"b": 4})
    return fig


def table_height(rows: int) -> int:
    """Pixels of a ``table_figure`` figure showing ``rows`` rows: the title margin, the header, the rows, 4 px below."""
    return 50 + TABLE_ROW_PX * (rows + 1) + 4 + 2


def format_value(value: Any) -> str:
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


SHARP_PX = 256  # the side a picture sent as a PNG source is enlarged to, so the browser's smoothing blurs no pixel


def image_source(picture: np.ndarray) -> dict[str, Any]:
    """An image trace of an (H, W, 3) uint8 picture sent as a PNG (a fraction of the bytes of its pixels as an array),
    on the same axes as ``z=picture``: enlarged by whole pixels first, as a browser smooths a small image it scales."""
    factor = max(1, SHARP_PX // max(picture.shape[:2]))
    enlarged = np.repeat(np.repeat(picture, factor, axis=0), factor, axis=1)
    step = 1 / factor
    return {"type": "image", "source": png_data_uri(enlarged), "dx": step, "dy": step, "x0": (step - 1) / 2,
            "y0": (step - 1) / 2}


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


def stretched_over(picture: np.ndarray, heat: np.ndarray) -> dict[str, float]:
    """Heatmap arguments that stretch ``heat`` (h, w) over ``picture`` at 45 % opacity."""
    scale = (picture.shape[1] / heat.shape[1], picture.shape[0] / heat.shape[0])
    return {"opacity": 0.45, "x0": (scale[0] - 1) / 2, "dx": scale[0], "y0": (scale[1] - 1) / 2, "dy": scale[1]}


def is_picture(fig: go.Figure) -> bool:
    """Whether the figure is a picture of maps (``layout.meta['picture']``): looked at, not read value by value,
    so a viewer may draw it as images without hover values (``pictures.py``)."""
    return isinstance(fig.layout.meta, dict) and bool(fig.layout.meta.get("picture"))


def is_shared(fig: go.Figure) -> bool:
    """Whether the figure draws data that is the same for every datapoint (see ``captured_states_figures``)."""
    return isinstance(fig.layout.meta, dict) and bool(fig.layout.meta.get("shared"))


