"""The score views' callbacks: the chart's and the grid's data follow the run, metric, epoch and the table's query
and filters; both are drawn in the browser (``assets/score_views.js``), the open datapoint's mark too."""

from __future__ import annotations

import json
from typing import Optional

from dash import Dash, Input, Output, State

from runners.eval_viewer.controls.ids import EPOCH_SELECT, METRIC_SELECT, RUN_SELECT
from runners.eval_viewer.scores.data import grid_view, history_view
from runners.eval_viewer.scores.ids import (
    SCORE_CHART,
    SCORE_CHART_DATA,
    SCORE_GRID,
    SCORE_GRID_DATA,
    SCORE_GRID_FILTERS,
    SCORES_MESSAGE,
    SENDS,
)
from runners.eval_viewer.shared import opened
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.feature import Feature
from runners.eval_viewer.shared.ids import SELECTED, SELECTED_ROW
from runners.eval_viewer.table.ids import TABLE, TABLE_CAPTION, TABLE_QUERY


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(SCORE_CHART_DATA, "data"), Input(RUN_SELECT, "value"),
                  Input(METRIC_SELECT, "value"), Input(EPOCH_SELECT, "options"),
                  Input(EPOCH_SELECT, "value"), prevent_initial_call=True)
    def chart(run_path: Optional[str], metric: Optional[str], _: list, epoch_key: Optional[str]) -> dict:
        return history_view(backend, run_path, metric, epoch_key)

    app.clientside_callback(  # the table's typed filters, passed on only when they changed: the grid sets its filter
        # model when it mounts, and the first page comes with its grid drawn for its filters
        """function(model, drawn) {
            const now = model || {};
            return JSON.stringify(now) === JSON.stringify(drawn || {}) ? window.dash_clientside.no_update : now;
        }""", Output(SCORE_GRID_FILTERS, "data"), Input(TABLE, "filterModel"),
        State(SCORE_GRID_FILTERS, "data"), prevent_initial_call=True)

    @app.callback(Output(SCORE_GRID_DATA, "data"), Output(SCORES_MESSAGE, "children"),
                  Input(TABLE_QUERY, "data"), Input(SCORE_GRID_FILTERS, "data"), prevent_initial_call=True)
    def grid(query: Optional[dict], filter_model: Optional[dict]) -> tuple:
        """Drawn for the table's query (run, epoch, metric, version, a clicked finding's idx, wrong only) and its
        typed filters: the grid shows the datapoints the table does."""
        return grid_view(backend, query, filter_model)
    _draw_in_the_browser(app)


def _draw_in_the_browser(app: Dash) -> None:
    """The chart and the grid drawn by ``assets/score_views.js`` (no server round trip), and plotly.js loaded once
    the table has its first rows, before a datapoint is opened."""
    app.clientside_callback("function(data) { return window.lanternScoreViews.drawChart('CHART', data); }"
                            .replace("CHART", SCORE_CHART), Output(SCORE_CHART, "id"),
                            Input(SCORE_CHART_DATA, "data"))
    draw_grid = ("function(data, selected) { return window.lanternScoreViews.drawGrid('GRID', data, selected, OPEN); }"
                 .replace("GRID", SCORE_GRID).replace("OPEN", json.dumps({"idx": SELECTED, "row": SELECTED_ROW})))
    app.clientside_callback(draw_grid, Output(SCORE_GRID, "id"), Input(SCORE_GRID_DATA, "data"),
                            State(SELECTED, "data"))
    opened.follow(app, f"""function(idx) {{  // the open datapoint's cell marked
        const grid = (window.dash_component_api.getLayout('{SCORE_GRID_DATA}') || {{}}).props || {{}};
        return ({draw_grid})(grid.data, idx);
    }}""", when_idle=True)
    app.clientside_callback(  # the table has its first rows: plotly.js can come now, before a datapoint is opened
        "function() { window.lanternPlotly.loadWhenIdle(); return window.dash_clientside.no_update; }",
        Output(TABLE_CAPTION, "id"), Input(TABLE_CAPTION, "children"), prevent_initial_call=True)


FEATURE = Feature(register, SENDS)
