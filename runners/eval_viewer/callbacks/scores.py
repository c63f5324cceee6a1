"""The metric over epochs, the per-datapoint score grid and the worst-first table."""

from __future__ import annotations

import math
from typing import Optional

import plotly.graph_objects as go
from dash import Dash, Input, Output

from debuggers.page_format import CorruptPageError
from runners.eval_viewer.backend.runs import Epoch, Run
from runners.eval_viewer.backend.scores import Scores, ScoresError, worst_first
from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.callbacks.components import message
from runners.eval_viewer.layout import ids

DEBUG_MARK = "✓"
_MARGIN = {"l": 40, "r": 10, "t": 36, "b": 30}


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(ids.SCORE_CHART, "figure"), Input(ids.RUN_SELECT, "value"),
                  Input(ids.METRIC_SELECT, "value"), Input(ids.EPOCH_SELECT, "options"),
                  Input(ids.EPOCH_SELECT, "value"))
    def draw_history(run_path: Optional[str], metric: Optional[str], _: list, epoch_key: Optional[str]) -> go.Figure:
        run = backend.run(run_path)
        return history_figure(backend, run, metric, epoch_key) if run and metric else _empty("no scores yet")

    @app.callback(Output(ids.SCORE_GRID, "figure"), Output(ids.TABLE, "data"), Output(ids.TABLE, "columns"),
                  Output(ids.SCORES_MESSAGE, "children"), Output(ids.TABLE_CAPTION, "children"),
                  Output(ids.TABLE, "active_cell"),
                  Input(ids.RUN_SELECT, "value"), Input(ids.EPOCH_SELECT, "value"), Input(ids.METRIC_SELECT, "value"),
                  Input(ids.EPOCH_VERSION, "data"))
    def draw_datapoints(run_path: Optional[str], epoch_key: Optional[str], metric: Optional[str], _: str) -> tuple:
        """Grid, rows, columns, message and caption; the active cell is cleared so any row can be clicked again."""
        return (*datapoint_views(backend, run_path, epoch_key, metric), None)


def datapoint_views(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str],
                    metric: Optional[str]) -> tuple:
    """The score grid, the table's rows and columns, a message and the table's caption.

    The caption names the epoch the table belongs to, so a reader (and a test) knows it is current.
    """
    run = backend.run(run_path)
    epoch = backend.epoch(run, epoch_key) if run else None
    if epoch is None:
        return _empty("pick a run and an epoch"), [], [], None, ""
    with_debug, problem = _debug_indices(backend, epoch)
    try:
        scores = backend.scores(epoch)
    except ScoresError as exc:
        rows = [{"id": i, "idx": i, "debug": DEBUG_MARK} for i in sorted(with_debug)]
        caption = f"{epoch.label}: datapoints with debug outputs; click a row to open one."
        return _empty("no scores"), rows, _columns(["idx", "debug"]), message(str(exc), "warning"), caption
    metric = metric if metric in scores.per_datapoint else (scores.rankable_metrics or [None])[0]
    if metric is None:
        return _empty("no per-datapoint scores"), [], [], message(
            f"{epoch.scores_path} has no per-datapoint scores to rank datapoints by", "warning"), ""
    rows = table_rows(scores, metric, with_debug)
    names = ["rank", "idx", metric, *[n for n in scores.per_datapoint if n != metric], "debug"]
    caption = f"{epoch.label}: {len(rows)} datapoints, worst {metric} first; click a row or a grid cell to open one."
    return grid_figure(scores, metric, with_debug), rows, _columns(names), problem, caption


def _debug_indices(backend: ViewerBackend, epoch: Epoch) -> tuple[set[int], Optional[object]]:
    """Datapoints with debug outputs at ``epoch``, and a message when its index cannot be read."""
    try:
        debug = backend.debug(epoch)
    except (CorruptPageError, OSError) as exc:
        return set(), message(str(exc), "danger")
    return (debug.indices if debug else set()), None


def history_figure(backend: ViewerBackend, run: Run, metric: str, epoch_key: Optional[str]) -> go.Figure:
    """Aggregated ``metric`` per epoch; diamonds mark epochs with debug outputs, the line the chosen epoch."""
    epochs = [e for e in backend.epochs(run) if e.scores_path]
    points = [(e, _aggregated(backend, e, metric)) for e in epochs]
    figure = go.Figure(go.Scatter(
        x=[e.label for e, _ in points], y=[v for _, v in points], mode="lines+markers",
        marker={"symbol": ["diamond" if e.has_debug else "circle" for e, _ in points],
                "size": [12 if e.has_debug else 7 for e, _ in points]},
        hovertemplate="%{x}: %{y:.4f}<extra></extra>"))
    chosen = next((e.label for e, _ in points if e.key == epoch_key), None)
    if chosen is not None:
        figure.add_vline(x=chosen, line_dash="dot", line_color="grey")
    figure.update_layout(title=f"{metric} over epochs (◆ debug outputs)", margin=_MARGIN, height=240,
                         xaxis={"type": "category"})
    return figure


def _aggregated(backend: ViewerBackend, epoch: Epoch, metric: str) -> Optional[float]:
    try:
        return backend.aggregated(epoch).get(metric)
    except ScoresError:
        return None


def grid_figure(scores: Scores, metric: str, with_debug: set[int]) -> go.Figure:
    """One cell per datapoint in idx order, red for bad whatever the metric's direction."""
    count = len(scores.datapoint_idx)
    width = max(1, math.ceil(math.sqrt(count)))
    cells = [[None] * width for _ in range(math.ceil(count / width))]
    idx_cells = [[None] * width for _ in cells]
    text = [[""] * width for _ in cells]
    for position, (idx, value) in enumerate(zip(scores.datapoint_idx, scores.per_datapoint[metric])):
        row, col = divmod(position, width)
        cells[row][col], idx_cells[row][col] = value, idx
        text[row][col] = f"idx {idx}: {metric} {value}" + (" · debug outputs" if idx in with_debug else "")
    higher = scores.higher_is_better.get(metric, True)
    figure = go.Figure(go.Heatmap(z=cells, customdata=idx_cells, text=text, hoverinfo="text", xgap=1, ygap=1,
                                  colorscale="RdYlGn" if higher else "RdYlGn_r"))
    figure.update_layout(title=f"{metric} per datapoint (click a cell)", margin=_MARGIN, height=320)
    figure.update_xaxes(showticklabels=False, constrain="domain")
    figure.update_yaxes(showticklabels=False, autorange="reversed", scaleanchor="x", constrain="domain")
    return figure


def table_rows(scores: Scores, metric: str, with_debug: set[int]) -> list[dict]:
    """Worst first by ``metric``; ``id`` is the idx, so a clicked cell names its datapoint."""
    rows = []
    for rank, idx in enumerate(worst_first(scores, metric), start=1):
        values = {name: _rounded(value) for name, value in scores.row(idx).items()}
        rows.append({"id": idx, "rank": rank, "idx": idx, **values, "debug": DEBUG_MARK if idx in with_debug else ""})
    return rows


def _rounded(value: object) -> object:
    return round(value, 4) if isinstance(value, float) else value


def _columns(names: list[str]) -> list[dict]:
    return [{"name": name, "id": name} for name in names]


def _empty(title: str) -> go.Figure:
    figure = go.Figure()
    figure.update_layout(title=title, margin=_MARGIN, xaxis={"visible": False}, yaxis={"visible": False})
    return figure
