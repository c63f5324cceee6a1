"""The Compare runs tab's callbacks: run against run, the joined table of the two epochs (``view.run_diff_section``),
and the datapoint opened in both sides.

The browser writes the two sides and the metric into ``RUN_DIFF_SHOWN`` only while the tab is shown and when they
change, so a hidden comparison costs nothing; the server then joins them (once per pair of tables, ``RunDiffs``) and
sends the summary and the columns. Rows are served a block at a time, filtered and sorted on the server like the
datapoint table's: AG Grid's filter model becomes ``(column, op, value)`` triples checked against the joined table's
own columns, values bound as parameters. A malformed request is answered with a message."""

from __future__ import annotations

import json
from typing import Any, Optional

from dash import Dash, Input, Output, State, no_update

from runners.eval_viewer.compare_runs.data import (
    RIGHT_TO_WRONG,
    WRONG_TO_RIGHT,
    diff_rows,
    diffs_of,
    side_of,
    sides_of,
)
from runners.eval_viewer.compare_runs.ids import (
    COMPARE_RUN_EPOCH_SELECT,
    COMPARE_RUN_SELECT,
    COMPARE_RUNS_DRAWN,
    COMPARE_RUNS_PANEL,
    COMPARE_RUNS_SHOWN,
    COMPARE_RUNS_STATUS,
    RUN_DIFF_ALL,
    RUN_DIFF_CAPTION,
    RUN_DIFF_QUERY,
    RUN_DIFF_ROWS,
    RUN_DIFF_SHOWN,
    RUN_DIFF_SUMMARY,
    RUN_DIFF_TABLE,
    RUN_DIFF_TO_RIGHT,
    RUN_DIFF_TO_WRONG,
    SENDS,
    TAB_COMPARE_RUNS,
)
from runners.eval_viewer.compare_runs.view import (
    compare_runs_tab,
    joined,
    other_run_epochs,
    other_run_options,
    rows_caption,
    run_columns,
    second_run,
)
from runners.eval_viewer.controls.ids import EPOCH_SELECT, METRIC_SELECT, RUN_SELECT
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import BadRequest, datapoint_idx, storable
from runners.eval_viewer.shared.components import message
from runners.eval_viewer.shared.feature import Feature, Tab
from runners.eval_viewer.shared.ids import SELECTED, SELECTED_ROW, TABS
from runners.eval_viewer.shared.opened import follow_status, follow_while_shown
from runners.eval_viewer.shared.row_grids import answer, apply_answer_script
from runners.eval_viewer.shared.table import TABLE_ERRORS
from utils.errors import LanternUserError

_WHILE_SHOWN = """function(tab, run, epoch, other, otherEpoch, metric, previous) {
    if (tab !== 'TAB') { return window.dash_clientside.no_update; }
    const shown = {first: {run: run, epoch: epoch}, second: {run: other, epoch: otherEpoch}, metric: metric};
    return JSON.stringify(shown) === JSON.stringify(previous) ? window.dash_clientside.no_update : shown;
}""".replace("TAB", TAB_COMPARE_RUNS)

_RESET = """function(query) {
    // New sides: their filters go, then the rows are asked again (as the datapoint table does on a switch).
    try {
        const api = dash_ag_grid.getApi('TABLE');
        api.setFilterModel(null);
        api.purgeInfiniteCache();
    } catch (error) { /* not drawn yet: it asks for its rows when it is */ }
    return window.dash_clientside.no_update;
}"""

_FLIPS = """function(all, toWrong, toRight) {
    const trigger = ((window.dash_clientside.callback_context.triggered[0] || {}).prop_id || '').split('.')[0];
    const change = FLIPS[trigger];
    try {
        dash_ag_grid.getApi('TABLE').setFilterModel(
            change ? {change: {filterType: 'text', type: 'contains', filter: change}} : null);
    } catch (error) { /* not drawn */ }
    return window.dash_clientside.no_update;
}"""

_OPEN = """function(cell) {
    const id = String((cell || {}).rowId);
    return /^[0-9]+$/.test(id) ? [parseInt(id), null] : [window.dash_clientside.no_update,
                                                          window.dash_clientside.no_update];
}"""


def register(app: Dash, backend: ViewerBackend) -> None:
    _join_runs(app, backend)
    _follow_the_second_run(app, backend)
    _draw_the_datapoint(app, backend)


def _join_runs(app: Dash, backend: ViewerBackend) -> None:
    """The run-against-run table: the sides (written by the browser only while the tab is shown) joined, its rows
    served, its flip filters and a click on a row opening the datapoint, in the browser."""
    app.clientside_callback(_WHILE_SHOWN, Output(RUN_DIFF_SHOWN, "data"), Input(TABS, "value"),
                            Input(RUN_SELECT, "value"), Input(EPOCH_SELECT, "value"),
                            Input(COMPARE_RUN_SELECT, "value"), Input(COMPARE_RUN_EPOCH_SELECT, "value"),
                            Input(METRIC_SELECT, "value"), State(RUN_DIFF_SHOWN, "data"),
                            prevent_initial_call=True)
    app.clientside_callback(_RESET.replace("TABLE", RUN_DIFF_TABLE), Output(RUN_DIFF_TABLE, "id"),
                            Input(RUN_DIFF_QUERY, "data"), prevent_initial_call=True)
    flips = json.dumps({RUN_DIFF_TO_WRONG: RIGHT_TO_WRONG, RUN_DIFF_TO_RIGHT: WRONG_TO_RIGHT})
    app.clientside_callback(_FLIPS.replace("TABLE", RUN_DIFF_TABLE).replace("FLIPS", flips),
                            Output(RUN_DIFF_ALL, "id"), Input(RUN_DIFF_ALL, "n_clicks"),
                            Input(RUN_DIFF_TO_WRONG, "n_clicks"), Input(RUN_DIFF_TO_RIGHT, "n_clicks"),
                            prevent_initial_call=True)
    app.clientside_callback(apply_answer_script(RUN_DIFF_TABLE), Output(RUN_DIFF_TABLE, "id", allow_duplicate=True),
                            Input(RUN_DIFF_ROWS, "data"), prevent_initial_call=True)
    app.clientside_callback(_OPEN, Output(SELECTED, "data", allow_duplicate=True),
                            Output(SELECTED_ROW, "data", allow_duplicate=True),
                            Input(RUN_DIFF_TABLE, "cellClicked"), prevent_initial_call=True)

    diffs = diffs_of(backend)

    @app.callback(Output(RUN_DIFF_QUERY, "data"), Output(RUN_DIFF_TABLE, "columnDefs"),
                  Output(RUN_DIFF_SUMMARY, "children"), Output(RUN_DIFF_SUMMARY, "color"),
                  Input(RUN_DIFF_SHOWN, "data"), prevent_initial_call=True)
    def join(shown: Optional[dict]) -> tuple:
        """The two sides joined: the query the rows are served for, the columns, the summary line."""
        view = joined(backend, shown if isinstance(shown, dict) else {})
        return view.query, view.columns, view.summary, view.color

    @app.callback(Output(RUN_DIFF_ROWS, "data"), Output(RUN_DIFF_CAPTION, "children"),
                  Input(RUN_DIFF_TABLE, "getRowsRequest"), State(RUN_DIFF_QUERY, "data"), prevent_initial_call=True)
    def serve_rows(request: Any, query: Optional[dict]) -> tuple:
        sides = sides_of(backend, query or {})
        if not request or sides is None:
            return answer([], 0, request), ""
        try:
            diff = diffs.diff(*sides, query.get("metric"))
            rows, count = diff_rows(diff, request, {**backend.class_names(sides[1].epoch),
                                                    **backend.class_names(sides[0].epoch)})
        except (*TABLE_ERRORS, LanternUserError, BadRequest) as exc:
            return answer([], 0, request), str(exc)
        return answer(rows, count, request), rows_caption(diff, count, request)


def _follow_the_second_run(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(COMPARE_RUN_SELECT, "options"), Output(COMPARE_RUN_SELECT, "value"),
                  Input(RUN_SELECT, "options"), Input(RUN_SELECT, "value"), State(COMPARE_RUN_SELECT, "value"),
                  prevent_initial_call=True)
    def other_runs(options: list, run_path: Optional[str], other_path: Optional[str]) -> tuple:
        """The runs offered; the second run stays while it is one of them, else the run's own (``second_run``)."""
        offered = other_run_options(options, run_path)
        kept = other_path in {option["value"] for option in offered}
        return offered, other_path if kept else second_run(backend, run_path)

    @app.callback(Output(COMPARE_RUN_EPOCH_SELECT, "options"), Output(COMPARE_RUN_EPOCH_SELECT, "value"),
                  Input(COMPARE_RUN_SELECT, "value"), State(EPOCH_SELECT, "value"),
                  State(RUN_SELECT, "value"), prevent_initial_call=True)
    def choose_other_epoch(other_path: Optional[str], epoch_key: Optional[str], run_path: Optional[str]) -> tuple:
        return other_run_epochs(backend, other_path, epoch_key, run_path)


def _draw_the_datapoint(app: Dash, backend: ViewerBackend) -> None:
    """The open datapoint in both sides, drawn while the tab is shown, once per datapoint and sides."""
    follow_while_shown(app, TAB_COMPARE_RUNS, COMPARE_RUNS_SHOWN)
    follow_status(app, TAB_COMPARE_RUNS, COMPARE_RUNS_STATUS, COMPARE_RUNS_DRAWN, [
        (RUN_SELECT, "value"), (EPOCH_SELECT, "value"), (COMPARE_RUN_SELECT, "value"),
        (COMPARE_RUN_EPOCH_SELECT, "value")])

    @app.callback(Output(COMPARE_RUNS_PANEL, "children"), Output(COMPARE_RUNS_DRAWN, "data"),
                  Output(COMPARE_RUNS_STATUS, "children"),
                  Input(COMPARE_RUNS_SHOWN, "data"),
                  Input(RUN_SELECT, "value"), Input(EPOCH_SELECT, "value"),
                  Input(COMPARE_RUN_SELECT, "value"), Input(COMPARE_RUN_EPOCH_SELECT, "value"),
                  State(TABS, "value"), State(COMPARE_RUNS_DRAWN, "data"), prevent_initial_call=True)
    def compare_runs(shown: Optional[dict], run_path: Optional[str], epoch_key: Optional[str],
                     other_path: Optional[str], other_key: Optional[str], tab: str, drawn: Optional[list]) -> tuple:
        shown = shown if isinstance(shown, dict) else None
        wanted = storable([None if shown is None else shown.get("idx"), run_path, epoch_key, other_path, other_key])
        if tab != TAB_COMPARE_RUNS or shown is None or wanted == drawn:
            return no_update, no_update, no_update
        sides = [side_of(backend, run_path, epoch_key), side_of(backend, other_path, other_key)]
        try:
            idx = datapoint_idx(shown.get("idx"))
        except BadRequest as exc:
            return message(str(exc), "warning"), wanted, ""
        if idx is None or None in sides:
            return message("Click a datapoint, then pick a second run and its epoch."), wanted, ""
        return run_columns(backend, sides, idx), wanted, ""


FEATURE = Feature(register, SENDS, Tab(TAB_COMPARE_RUNS, compare_runs_tab))
