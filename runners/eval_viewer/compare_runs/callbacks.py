"""Run against run (``layout/run_diff.py``): the joined table of the two epochs Compare runs shows.

The browser writes the two sides and the metric into ``SHOWN`` only while the tab is shown and when they change,
so a hidden comparison costs nothing; the server then joins them (once per pair of tables, ``RunDiffs``) and
sends the summary and the columns. Rows are served a block at a time, filtered and sorted on the server like
the datapoint table's: AG Grid's filter model becomes ``(column, op, value)`` triples checked against the
joined table's own columns, values bound as parameters. A malformed request is answered with a message.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from dash import Dash, Input, Output, State

from runners.eval_viewer.compare_runs import view as run_diff
from runners.eval_viewer.compare_runs.data import CLASS_COLUMNS, RIGHT_TO_WRONG, WRONG_TO_RIGHT, RunDiff, Side, diffs_of
from runners.eval_viewer.shared import ids
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import BadRequest, paging
from runners.eval_viewer.shared.first_view import FirstView
from runners.eval_viewer.shared.table import TABLE_ERRORS
from runners.eval_viewer.table.data import where_of
from runners.eval_viewer.table.filter_text import LABEL_COLUMNS
from utils.errors import LanternUserError

_WHILE_SHOWN = """function(tab, run, epoch, other, otherEpoch, metric, previous) {
    if (tab !== 'TAB') { return window.dash_clientside.no_update; }
    const shown = {first: {run: run, epoch: epoch}, second: {run: other, epoch: otherEpoch}, metric: metric};
    return JSON.stringify(shown) === JSON.stringify(previous) ? window.dash_clientside.no_update : shown;
}""".replace("TAB", ids.TAB_COMPARE_RUNS)

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
    diffs = diffs_of(backend)
    app.clientside_callback(_WHILE_SHOWN, Output(ids.RUN_DIFF_SHOWN, "data"), Input(ids.TABS, "value"),
                            Input(ids.RUN_SELECT, "value"), Input(ids.EPOCH_SELECT, "value"),
                            Input(ids.COMPARE_RUN_SELECT, "value"), Input(ids.COMPARE_RUN_EPOCH_SELECT, "value"),
                            Input(ids.METRIC_SELECT, "value"), State(ids.RUN_DIFF_SHOWN, "data"),
                            prevent_initial_call=True)
    app.clientside_callback(_RESET.replace("TABLE", run_diff.TABLE), Output(run_diff.TABLE, "id"),
                            Input(ids.RUN_DIFF_QUERY, "data"), prevent_initial_call=True)
    flips = json.dumps({run_diff.SHOW_TO_WRONG: RIGHT_TO_WRONG, run_diff.SHOW_TO_RIGHT: WRONG_TO_RIGHT})
    app.clientside_callback(_FLIPS.replace("TABLE", run_diff.TABLE).replace("FLIPS", flips),
                            Output(run_diff.SHOW_ALL, "id"), Input(run_diff.SHOW_ALL, "n_clicks"),
                            Input(run_diff.SHOW_TO_WRONG, "n_clicks"), Input(run_diff.SHOW_TO_RIGHT, "n_clicks"),
                            prevent_initial_call=True)
    app.clientside_callback(_OPEN, Output(ids.SELECTED, "data", allow_duplicate=True),
                            Output(ids.SELECTED_ROW, "data", allow_duplicate=True),
                            Input(run_diff.TABLE, "cellClicked"), prevent_initial_call=True)

    @app.callback(Output(ids.RUN_DIFF_QUERY, "data"), Output(run_diff.TABLE, "columnDefs"),
                  Output(run_diff.SUMMARY, "children"), Output(run_diff.SUMMARY, "color"),
                  Input(ids.RUN_DIFF_SHOWN, "data"), prevent_initial_call=True)
    def join(shown: Optional[dict]) -> tuple:
        """The two sides joined: the query the rows are served for, the columns, the summary line."""
        view = joined(backend, shown if isinstance(shown, dict) else {})
        return view.query, view.columns, view.summary, view.color

    @app.callback(Output(run_diff.TABLE, "getRowsResponse"), Output(run_diff.CAPTION, "children"),
                  Input(run_diff.TABLE, "getRowsRequest"), State(ids.RUN_DIFF_QUERY, "data"), prevent_initial_call=True)
    def serve_rows(request: Any, query: Optional[dict]) -> tuple:
        sides = _sides(backend, query or {})
        if not request or sides is None:
            return {"rowData": [], "rowCount": 0}, ""
        try:
            diff = diffs.diff(*sides, query.get("metric"))
            rows, count = diff_rows(diff, request, {**backend.class_names(sides[1].epoch),
                                                    **backend.class_names(sides[0].epoch)})
        except (*TABLE_ERRORS, LanternUserError, BadRequest) as exc:
            return {"rowData": [], "rowCount": 0}, str(exc)
        return {"rowData": rows, "rowCount": count}, _caption(diff, count, request)


def joined(backend: ViewerBackend, shown: dict) -> run_diff.JoinView:
    """The two sides ``shown`` names (``{'first': {'run', 'epoch'}, 'second': ..., 'metric'}``) joined: the query
    the joined table's rows are served for, its columns and the summary line (or why there is none)."""
    sides = _sides(backend, shown)
    if sides is None:
        return run_diff.JoinView()
    try:
        diff = diffs_of(backend).diff(*sides, shown.get("metric"))
    except (*TABLE_ERRORS, LanternUserError, BadRequest) as exc:
        return run_diff.JoinView(summary=str(exc), color="warning")
    classes = {**backend.class_names(sides[1].epoch), **backend.class_names(sides[0].epoch)}
    return run_diff.JoinView({"first": shown["first"], "second": shown["second"], "metric": diff.metric},
                             run_diff.diff_columns(diff, classes), run_diff.summary(diff), "info", shown)


def first_run_diff(backend: ViewerBackend, first: FirstView, other: Optional[str],
                   other_epoch: Optional[str]) -> run_diff.JoinView:
    """Run against run as the first page shows it: joined only when Compare runs is the tab it opens on with a
    second run chosen (an address's), so no callback is needed for it."""
    if first.tab != ids.TAB_COMPARE_RUNS or other is None:
        return run_diff.JoinView()
    return joined(backend, {"first": {"run": first.run, "epoch": first.epoch},
                            "second": {"run": other, "epoch": other_epoch}, "metric": first.view.metric})


def diff_rows(diff: RunDiff, request: Any, class_names: dict[int, str]) -> tuple[list[dict], int]:
    """Rows ``startRow .. endRow`` of the joined table under the request's filters and sort, and how many match."""
    asked = paging(request)
    where = diff_where(asked.filter_model, dict(diff.table.columns()), class_names)
    rows = diff.table.page(where=where, order_by=asked.sort, descending=asked.descending, offset=asked.start,
                           limit=asked.end - asked.start)
    return [{key: value for key, value in row.items() if key != "label_differs"} for row in rows], \
        diff.table.count(where)


def diff_where(filter_model: dict, kinds: dict[str, str], class_names: dict[int, str]) -> list[tuple]:
    """The joined table's filter boxes as ``(column, op, value)`` triples, typed as in the datapoint table
    (``where_of``): the label and both predictions take class names, as the table's ``label`` does."""
    where: list[tuple] = []
    for column, condition in filter_model.items():
        typed_as = LABEL_COLUMNS[0] if column in CLASS_COLUMNS else column
        where += [(column, *rest) for _, *rest in where_of({typed_as: condition}, {typed_as: kinds.get(column, "")},
                                                          class_names)]
    return where


def _sides(backend: ViewerBackend, shown: dict) -> Optional[tuple[Side, Side]]:
    """The two (run, epoch) sides ``shown`` names, None until both are chosen and exist."""
    sides = []
    for part in ("first", "second"):
        chosen = shown.get(part) if isinstance(shown.get(part), dict) else {}
        run = backend.run(chosen.get("run") if isinstance(chosen.get("run"), str) else None)
        epoch = backend.epoch(run, chosen.get("epoch")) if run else None
        if epoch is None:
            return None
        sides.append(Side(run, epoch))
    return sides[0], sides[1]


def _caption(diff: RunDiff, count: int, request: dict) -> str:
    total = diff.table.count()
    sort = (request.get("sortModel") or [{}])[0]
    order = f", sorted by {run_diff.column_title(sort['colId'], diff.metric)} " \
            f"({'highest' if sort.get('sort') == 'desc' else 'lowest'} first)" if sort.get("colId") else ""
    matching = f"{count} of {total} datapoints match the filters" if count < total else f"{total} datapoints"
    return f"{matching}{order}; click one to open it in both below."
