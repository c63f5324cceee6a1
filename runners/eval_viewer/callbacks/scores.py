"""The metric over epochs and the per-datapoint score grid.

The grid keeps every datapoint at the same cell in every epoch (idx order) and
stays readable at any size: above ``MAX_CELLS`` datapoints each cell holds a bin
of consecutive idx and shows its worst value; clicking it opens that worst
datapoint. The open datapoint is marked; moving the mark patches the figure
instead of redrawing it. A finding clicked in the Failures tab (``TABLE_IDX_FILTER``)
narrows the grid to its datapoints, as it narrows the table.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import plotly.graph_objects as go
from dash import Dash, Input, Output, Patch, State, no_update

from analysis.epoch_table import Filter
from runners.eval_viewer.backend.runs import Run
from runners.eval_viewer.backend.table import TABLE_ERRORS, Table
from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.callbacks.components import message
from runners.eval_viewer.callbacks.table import table_of
from runners.eval_viewer.layout import ids

MAX_CELLS = 10_000  # at most 100 x 100 cells, whatever the number of datapoints
_MARGIN = {"l": 40, "r": 10, "t": 36, "b": 30}


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(ids.SCORE_CHART, "figure"), Input(ids.RUN_SELECT, "value"),
                  Input(ids.METRIC_SELECT, "value"), Input(ids.EPOCH_SELECT, "options"),
                  Input(ids.EPOCH_SELECT, "value"), prevent_initial_call=True)
    def draw_history(run_path: Optional[str], metric: Optional[str], _: list, epoch_key: Optional[str]) -> go.Figure:
        return history_view(backend, run_path, metric, epoch_key)

    @app.callback(Output(ids.SCORE_GRID, "figure"), Output(ids.SCORES_MESSAGE, "children"),
                  Output(ids.GRID_DRAWN, "data"), Input(ids.TABLE_QUERY, "data"), State(ids.SELECTED, "data"),
                  prevent_initial_call=True)
    def draw_grid(query: Optional[dict], selected: Optional[int]) -> tuple:
        """Drawn for the table's query (run, epoch, metric, version, a clicked finding's idx): once per switch."""
        return grid_view(backend, query, selected)

    @app.callback(Output(ids.SCORE_GRID, "figure", allow_duplicate=True), Input(ids.SELECTED, "data"),
                  State(ids.RUN_SELECT, "value"), State(ids.EPOCH_SELECT, "value"), State(ids.GRID_DRAWN, "data"),
                  State(ids.TABLE_QUERY, "data"), prevent_initial_call=True)
    def mark_selected(selected: Optional[int], run_path: Optional[str], epoch_key: Optional[str],
                      drawn: Optional[bool], query: Optional[dict]) -> object:
        """Moves the mark only; a grid not drawn yet marks the open datapoint when it is drawn."""
        if not drawn:
            return no_update
        try:
            _, table = table_of(backend, run_path, epoch_key)
        except TABLE_ERRORS:
            return no_update
        if table is None:
            return no_update
        patch = Patch()
        shown = table.values(["idx"], where=narrowed((query or {}).get("idx")))["idx"]
        patch["data"][1].update(_mark(shown, selected))
        return patch


def history_view(backend: ViewerBackend, run_path: Optional[str], metric: Optional[str],
                 epoch_key: Optional[str]) -> go.Figure:
    """The score chart of a run and metric (the first page's, and after every switch)."""
    run = backend.run(run_path)
    return history_figure(backend, run, metric, epoch_key) if run and metric else _empty("no scores yet")


def grid_view(backend: ViewerBackend, query: Optional[dict], selected: Optional[int]) -> tuple:
    """The score grid of the table's query, the message shown above it, and whether it holds its mark trace
    (the first page's, and after every switch)."""
    query = query or {}
    run_path, epoch_key, metric = query.get("run"), query.get("epoch"), query.get("metric")
    try:
        epoch, table = table_of(backend, run_path, epoch_key)
    except TABLE_ERRORS as exc:
        return _empty("no scores"), message(str(exc), "warning"), False
    if table is not None and "problem" in table.roles:
        return _empty("no scores"), message(table.roles["problem"], "warning"), False
    if table is None or metric not in dict(table.columns()):
        return _empty("no per-datapoint scores"), None, False
    figure = grid_figure(table, metric, backend.higher_is_better(epoch, metric), selected, narrowed(query.get("idx")))
    return figure, None, True


def narrowed(idx_filter: Optional[list]) -> Optional[Filter]:
    """The table filter for the idx a clicked finding chose (None: every datapoint)."""
    return None if idx_filter is None else [("idx", "in", list(idx_filter))]


def history_figure(backend: ViewerBackend, run: Run, metric: str, epoch_key: Optional[str]) -> go.Figure:
    """Aggregated ``metric`` per epoch; diamonds mark epochs with debug outputs, the line the chosen epoch.
    Built in one step (plotly's ``add_vline`` and ``update_layout`` cost 40 ms more, on every page load)."""
    epochs = [e for e in backend.epochs(run) if e.scores_path]
    points = [(e, _aggregated(backend, e, metric)) for e in epochs]
    chosen = next((e.label for e, _ in points if e.key == epoch_key), None)
    values = [v for _, v in points if v is not None]
    layout = {"title": {"text": f"{metric} over epochs (◆ debug outputs)"}, "margin": _MARGIN, "height": 200,
              "xaxis": {"type": "category"}, "yaxis": {"range": _padded_range(values)} if values else {},
              "shapes": [] if chosen is None else [{"type": "line", "x0": chosen, "x1": chosen, "xref": "x", "y0": 0,
                                                    "y1": 1, "yref": "y domain",
                                                    "line": {"dash": "dot", "color": "grey"}}]}
    return go.Figure(data=[{
        "type": "scatter", "x": [e.label for e, _ in points], "y": [v for _, v in points], "mode": "lines+markers",
        "marker": {"symbol": ["diamond" if e.has_debug else "circle" for e, _ in points],
                   "size": [12 if e.has_debug else 7 for e, _ in points]},
        "hovertemplate": "%{x}: %{y:.4f}<extra></extra>"}], layout=layout)


def _padded_range(values: list[float]) -> list[float]:
    """The values' span with 10 % air; a single value gets a small band around it, not plotly's ±1."""
    low, high = min(values), max(values)
    pad = (high - low) * 0.1 or max(abs(high) * 0.05, 0.01)
    return [low - pad, high + pad]


def _aggregated(backend: ViewerBackend, epoch, metric: str) -> Optional[float]:
    try:
        return backend.aggregated(epoch).get(metric)
    except TABLE_ERRORS:
        return None


def grid_shape(count: int) -> tuple[int, int, int]:
    """``(bin, columns, rows)``: datapoints per cell and the grid's size for ``count`` datapoints."""
    bin_size = max(1, math.ceil(count / MAX_CELLS))
    cells = math.ceil(count / bin_size)
    width = max(1, math.ceil(math.sqrt(cells)))
    return bin_size, width, max(1, math.ceil(cells / width))


def grid_figure(table: Table, metric: str, higher_is_better: bool, selected: Optional[int],
                where: Optional[Filter] = None) -> go.Figure:
    """Cells in idx order, red for bad whatever the metric's direction; a bin shows (and opens) its worst.
    ``where`` narrows the grid to some datapoints (a finding's)."""
    columns = table.values(["idx", metric], where=where)
    idx, values = columns["idx"], columns[metric].astype(np.float64)
    if not len(idx):
        return _empty("none of the chosen datapoints is in this epoch")
    bin_size, width, height = grid_shape(len(idx))
    padded = np.full(width * height * bin_size, np.nan)
    padded[:len(values)] = values
    badness = padded if not higher_is_better else -padded
    bins = np.where(np.isnan(badness), np.inf, badness).reshape(-1, bin_size)  # a missing score is the worst
    worst = bins.argmax(axis=1)
    cell_positions = np.minimum(np.arange(len(bins)) * bin_size + worst, len(idx) - 1)
    cell_values = padded.reshape(-1, bin_size)[np.arange(len(bins)), worst]
    cell_values[np.arange(len(bins)) * bin_size >= len(idx)] = np.nan
    cell_idx = np.where(np.arange(len(bins)) * bin_size < len(idx), idx[cell_positions], -1)
    text = [_hover(idx, position, bin_size, int(cell_idx[i]), cell_values[i], metric)
            for i, position in enumerate(np.arange(len(bins)) * bin_size)]
    per_cell = f", worst of {bin_size} per cell" if bin_size > 1 else ""
    chosen = f"of {len(idx)} chosen datapoints" if where else "per datapoint"
    gap = 1 if width < 60 else 0
    axis = {"showticklabels": False, "constrain": "domain", "showgrid": False, "zeroline": False}
    return go.Figure(data=[  # built in one step: plotly's update_* calls cost 60 ms more on every load and switch
        {"type": "heatmap", "z": cell_values.reshape(height, width), "customdata": cell_idx.reshape(height, width),
         "text": np.array(text, dtype=object).reshape(height, width), "hoverinfo": "text", "xgap": gap, "ygap": gap,
         "colorscale": "RdYlGn" if higher_is_better else "RdYlGn_r", "colorbar": {"thickness": 10}},
        {"type": "scatter", "mode": "markers", "hoverinfo": "skip", "showlegend": False,
         "marker": {"symbol": "square-open", "size": 12, "color": "#1f2a37", "line": {"width": 3}},
         **_mark(idx, selected)}],
        layout={"title": {"text": f"{metric} {chosen}, idx order{per_cell} (click a cell)"}, "margin": _MARGIN,
                "height": 300, "xaxis": axis, "yaxis": {**axis, "autorange": "reversed", "scaleanchor": "x"}})


def _hover(idx: np.ndarray, start: int, bin_size: int, worst_idx: int, value: float, metric: str) -> str:
    if start >= len(idx):
        return ""
    shown = "n/a" if math.isnan(value) else f"{value:.4g}"
    if bin_size == 1:
        return f"idx {worst_idx}: {metric} {shown}"
    last = idx[min(start + bin_size, len(idx)) - 1]
    return f"idx {idx[start]}–{last}: worst {metric} {shown} (idx {worst_idx})"


def _mark(idx: np.ndarray, selected: Optional[int]) -> dict:
    """``x``/``y`` of the open datapoint's cell in a grid of ``idx`` (empty when none is open or the grid
    lacks it)."""
    position = int(np.searchsorted(idx, selected)) if selected is not None else len(idx)
    if position >= len(idx) or idx[position] != selected:
        return {"x": [], "y": []}
    bin_size, width, _ = grid_shape(len(idx))
    row, column = divmod(position // bin_size, width)
    return {"x": [column], "y": [row]}


def _empty(title: str) -> go.Figure:
    return go.Figure(layout={"title": {"text": title}, "margin": _MARGIN, "xaxis": {"visible": False},
                             "yaxis": {"visible": False}})
