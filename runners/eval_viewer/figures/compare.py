"""One debugger's output at several epochs (or in several runs) as rows of figures that can be compared.

``compare_figures`` draws each column's output through the figure registry (``registry.py``) and lines the figures
up in rows, so that a row reads across like one figure:

* the same channels in every column (feature maps: chosen once, by their highest mean activation
  in any column, among the channels every column holds);
* one colour scale per row (heatmaps) and the same axes (bars, histograms, the log axis of
  gradient flow), so a brighter cell or a taller bar means a larger value;
* a difference column, last minus first, on a diverging colour scale centred on 0 (red: grew),
  where the two maps (or bar charts) have the same shape;
* every figure of a row laid out alike for a narrow column: maps are drawn as pictures
  (``pictures.py``) of one size, their colour bar (titled with its unit) under them, captions
  of a mosaic of maps with room above each map; graphs get the same height and margins and titles wrapped to the
  column.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import replace
from itertools import zip_longest
from typing import Any, Optional

import numpy as np
import plotly.graph_objects as go

from debuggers import outputs as kinds
from runners.eval_viewer.figures.base import (
    MAX_PANELS,
    Figures,
    colour_bar,
    colour_unit,
    is_picture,
    with_caption_rows,
)
from runners.eval_viewer.figures.context import NO_CONTEXT, DrawContext
from runners.eval_viewer.figures.registry import output_figures

Row = list[Optional[go.Figure]]
DIFFERENCE_SCALE = "RdBu_r"  # blue below 0, white at 0, red above
ROW_PX = 690  # a comparison's row at the viewer's narrowest usual width (1280 px): what its figures are laid out for
CHAR_PX = 6  # an 11 px title's average character
MIN_TITLE_CHARS = 18
TITLE_PAD_PX = 12  # above the title (plotly's top anchor of a title of several lines sits too high without it)
TITLE_LINE_PX = 15
PANEL_TITLES_PX = 28  # two lines of 10 px titles over side-by-side panels (Grad-CAM's "prediction:<br>ring")
CAPTION_PX = 16  # a map's caption over the first row of a mosaic, above the plot
COLOUR_BAR = {"orientation": "h", "thickness": 8, "len": 1, "x": 0.5, "xanchor": "center", "y": 0, "yanchor": "top",
              "ypad": 6, "tickfont": {"size": 9}, "outlinewidth": 0}
COLOUR_BAR_PX = 34  # room under the plot for a horizontal colour bar and its tick labels


def compare_figures(outputs: list[Any], contexts: Optional[list[DrawContext]] = None) -> list[Row]:
    """Rows of figures: one cell per output (None where a column has no such figure), then, for two columns
    or more, the difference of the last and the first column (None where they cannot be subtracted).
    ``contexts`` holds what each column is drawn with; feature maps draw the same channels in every column."""
    channels = aligned_channels(outputs)
    columns: list[Figures] = []
    for output, context in zip(outputs, contexts or [NO_CONTEXT] * len(outputs)):
        figures = [] if output is None else output_figures(output, replace(context, channels=channels))
        columns.append([_spaced(fig) for fig in figures])
    rows = [list(row) for row in zip_longest(*columns)]
    for row in rows:
        drawn = [fig for fig in row if fig is not None]
        share_scales(drawn)
        if len(row) > 1:
            row.append(difference_figure(row[0], row[-1]))
        for fig in drawn[:-1]:  # one colour bar per row is enough: the scale is shared
            fig.update_traces(showscale=False, selector={"type": "heatmap"})
        _lay_out_row([fig for fig in row if fig is not None], len(row))
    return rows


def _spaced(fig: go.Figure) -> go.Figure:
    """A mosaic of maps with room for its captions in a narrow column (``with_caption_rows``)."""
    return with_caption_rows(fig) if is_picture(fig) and _mosaic(fig) else fig


def _mosaic(fig: go.Figure) -> bool:
    """Maps tiled into one heatmap, each captioned above it (``figures._grid``)."""
    return isinstance(fig.layout.meta, dict) and "tiles" in fig.layout.meta


def _lay_out_row(figures: list[go.Figure], columns: int) -> None:
    """Each figure laid out for a column 1/``columns`` of the row wide: pictures framed alike (``pictures``: one
    size, their panels as wide in every column), graphs compacted and given the same height and margins, so their
    plots are the same size in every column (a brighter cell or a taller bar is comparable)."""
    pictures = [fig for fig in figures if is_picture(fig)]
    panels = max((_panel_count(fig) for fig in pictures), default=0)
    for fig in pictures:
        fig.update_layout(meta={**fig.layout.meta, "frame": {"width": ROW_PX // columns, "panels": panels}})
    for fig in figures:
        if not is_picture(fig):
            _compact(fig, ROW_PX // columns)
    graphs = [fig for fig in figures if not _is_table(fig) and not is_picture(fig)]
    if not graphs:
        return
    margin = {side: max(fig.layout.margin[side] for fig in graphs) for side in "lrtb"}
    plot = max(fig.layout.height - fig.layout.margin.t - fig.layout.margin.b for fig in graphs)
    for fig in graphs:
        fig.update_layout(height=plot + margin["t"] + margin["b"], margin=margin)


def _compact(fig: go.Figure, width: int) -> None:
    """A graph for a column ``width`` pixels wide: the title wrapped to it and anchored at the top, no legend, titles
    over side-by-side panels on two short lines, a colour bar under the plot. Tables stay as they are (text, as tall
    as their rows)."""
    if _is_table(fig):  # drawn as text under an HTML title, which wraps by itself
        return
    chars = max(MIN_TITLE_CHARS, (width - 2 * TITLE_PAD_PX) // CHAR_PX)
    lines = textwrap.wrap(str(fig.layout.title.text or ""), chars, break_long_words=False) or [""]
    fig.update_layout(showlegend=False, title={"text": "<br>".join(lines), "font": {"size": 11}, "yref": "container",
                                               "y": 1, "yanchor": "top", "pad": {"t": TITLE_PAD_PX}})
    panels = [note for note in fig.layout.annotations or () if str(note.xref).endswith(" domain")]
    for note in panels:
        note.update(text=note.text.replace(": ", ":<br>"), font_size=10)
    colour_bar = any(isinstance(trace, go.Heatmap) and trace.showscale is not False for trace in fig.data)
    bottom = 45 if fig.layout.xaxis.title.text else 30  # room for axis titles and tick labels
    margin = {"l": 50 if fig.layout.yaxis.title.text else 30, "r": 10,
              "t": TITLE_PAD_PX + TITLE_LINE_PX * len(lines) + (PANEL_TITLES_PX if panels else 0)
              + (CAPTION_PX if _mosaic(fig) else 4), "b": bottom + (COLOUR_BAR_PX if colour_bar else 0)}
    fig.update_layout(height=(fig.layout.height or 320) - 80 + margin["t"] + margin["b"], margin=margin)
    fig.update_traces(colorbar=COLOUR_BAR, selector={"type": "heatmap"})


def _panel_count(fig: go.Figure) -> int:
    """Side-by-side panels of a picture (one per subplot; a mosaic is one)."""
    return len({trace.xaxis or "x" for trace in fig.data})


def _is_table(fig: go.Figure) -> bool:
    return any(isinstance(trace, go.Table) for trace in fig.data)


def aligned_channels(outputs: list[Any]) -> Optional[list[int]]:
    """For feature maps in every column: the channel indices to draw in all of them, else None.

    Among the channels every column holds, the ``MAX_PANELS`` of highest mean activation in any column.
    """
    maps = [output for output in outputs if isinstance(output, dict)]
    if not maps or len(maps) != len(outputs) or any(m.get("kind") != kinds.KIND_FEATURE_MAP for m in maps):
        return None
    strength: dict[int, float] = {}
    held = None
    for output in maps:
        fmap = np.asarray(output["feature_map"], dtype=np.float64)
        indices = [int(i) for i in np.asarray(output.get("channel_indices", np.arange(fmap.shape[0])))]
        held = set(indices) if held is None else held & set(indices)
        for index, mean in zip(indices, np.nanmean(fmap, axis=(1, 2))):
            strength[index] = max(strength.get(index, -math.inf), float(mean))
    return sorted(held or [], key=lambda index: (-strength[index], index))[:MAX_PANELS]


def share_scales(figures: list[go.Figure]) -> None:
    """One colour range for the heatmaps at the same place in each figure, and one range per value axis."""
    for traces in zip(*(fig.data for fig in figures)):
        if all(isinstance(trace, go.Heatmap) for trace in traces) and all(t.zmin is None for t in traces):
            values = [np.asarray(t.z, dtype=np.float64) for t in traces]
            finite = [v[np.isfinite(v)] for v in values if np.isfinite(v).any()]
            if finite:
                low, high = min(float(v.min()) for v in finite), max(float(v.max()) for v in finite)
                for trace in traces:
                    trace.update(zmin=low, zmax=high)
    _share_axis(figures, "y")
    _share_axis(figures, "x")


def _share_axis(figures: list[go.Figure], axis: str) -> None:
    """The same range on the ``axis`` of every figure made only of bars over numbers (histograms on x)."""
    extents = [_extent(fig, axis) for fig in figures]
    if len(figures) < 2 or any(extent is None for extent in extents):
        return
    low, high = min(e[0] for e in extents), max(e[1] for e in extents)
    log = (getattr(figures[0].layout, f"{axis}axis").type == "log")
    if log:
        span = [math.log10(max(low, 1e-300)), math.log10(max(high, 1e-300))]
        pad = 0.05 * max(span[1] - span[0], 1e-3)
        value_range = [span[0] - pad, span[1] + pad]
    else:
        low, high = (min(low, 0.0), max(high, 0.0)) if axis == "y" else (low, high)
        pad = 0.05 * max(high - low, 1e-12)
        value_range = [low - (pad if low < 0 or axis == "x" else 0), high + pad]
    for fig in figures:
        fig.update_layout({f"{axis}axis": {"range": value_range, "autorange": False}})


def _extent(fig: go.Figure, axis: str) -> Optional[tuple[float, float]]:
    """The data extent of ``axis`` over the figure's bars (and histograms' x), None if it has other traces."""
    values: list[np.ndarray] = []
    for trace in fig.data:
        if isinstance(trace, go.Bar) and axis == "y":
            values.append(np.asarray(trace.y, dtype=np.float64))
            if trace.error_y is not None and trace.error_y.array is not None:
                spread = np.asarray(trace.error_y.array, dtype=np.float64)
                values += [values[-1] + spread, values[-1] - spread]
        elif isinstance(trace, go.Bar) and _numeric(trace.x):
            centres = np.asarray(trace.x, dtype=np.float64)
            half = np.asarray(trace.width, dtype=np.float64) / 2 if trace.width is not None else 0.5
            values += [centres - half, centres + half]
        elif isinstance(trace, go.Histogram) and axis == "x":
            values.append(np.asarray(trace.x, dtype=np.float64))
        else:
            return None
    finite = [v[np.isfinite(v)] for v in values if np.isfinite(v).any()]
    return (min(float(v.min()) for v in finite), max(float(v.max()) for v in finite)) if finite else None


def _numeric(values: Any) -> bool:
    return values is not None and np.asarray(values).dtype.kind in "biuf"


def difference_figure(first: Optional[go.Figure], last: Optional[go.Figure]) -> Optional[go.Figure]:
    """``last`` minus ``first``: heatmaps of equal shape on a diverging scale centred on 0, or bars over the
    same x; None where the figures hold anything else (tables, images alone), differ in shape, or title
    their panels differently (channels or classes that are not the same)."""
    if first is None or last is None or first is last or _panel_titles(first) != _panel_titles(last):
        return None
    pairs = list(zip(first.data, last.data))
    if len(first.data) != len(last.data) or not pairs:
        return None
    heatmaps = [(a, b) for a, b in pairs if isinstance(a, go.Heatmap) and isinstance(b, go.Heatmap)]
    bars = [(a, b) for a, b in pairs if isinstance(a, go.Bar) and isinstance(b, go.Bar)]
    if heatmaps and all(np.shape(a.z) == np.shape(b.z) for a, b in heatmaps):
        return _heatmap_difference(last, heatmaps)
    if bars and len(bars) == len(pairs) and all(_same(a.x, b.x) and len(a.y) == len(b.y) for a, b in bars):
        return _bar_difference(last, bars)
    return None


def _panel_titles(fig: go.Figure) -> list[str]:
    return [annotation.text for annotation in fig.layout.annotations or ()]


def _same(a: Any, b: Any) -> bool:
    """The same x values (bars without x are at 0, 1, ...: the same where they are as many)."""
    if a is None or b is None:
        return a is None and b is None
    return len(a) == len(b) and all(x == y for x, y in zip(a, b))


def _heatmap_difference(last: go.Figure, heatmaps: list[tuple[go.Heatmap, go.Heatmap]]) -> go.Figure:
    changes = [np.asarray(b.z, dtype=np.float64) - np.asarray(a.z, dtype=np.float64) for a, b in heatmaps]
    finite = [np.abs(c[np.isfinite(c)]) for c in changes if np.isfinite(c).any()]
    bound = max([float(c.max()) for c in finite] + [1e-12])
    fig = go.Figure(layout=last.layout)
    for (_, b), change in zip(heatmaps, changes):
        unit = colour_unit(b)
        fig.add_trace(go.Heatmap(z=change, xaxis=b.xaxis, yaxis=b.yaxis, colorscale=DIFFERENCE_SCALE, zmid=0.0,
                                 zmin=-bound, zmax=bound, hoverongaps=False, showscale=b.showscale is not False,
                                 colorbar=colour_bar(f"Δ {unit}" if unit else "change")))
    fig.update_layout(title={"text": "difference: last − first column"})
    return fig


def _bar_difference(last: go.Figure, bars: list[tuple[go.Bar, go.Bar]]) -> go.Figure:
    fig = go.Figure(layout=last.layout)
    for a, b in bars:
        change = np.asarray(b.y, dtype=np.float64) - np.asarray(a.y, dtype=np.float64)
        fig.add_trace(go.Bar(x=b.x, y=change, width=b.width, marker_color=np.where(change >= 0, "#d6604d", "#4393c3")))
    fig.update_yaxes(type="linear", range=None, autorange=True, tickvals=None, ticktext=None)
    fig.update_layout(title={"text": "difference: last − first column"}, showlegend=False)
    return fig
