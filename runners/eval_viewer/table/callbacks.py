"""The table's callbacks: what follows the chosen epoch (its metric, badges, query and columns), the rows served a
block at a time, the filters reset in the browser, and the chips, column chooser and open datapoint
(``filters.py``, ``selection.py``)."""

from __future__ import annotations

from typing import Optional

from dash import Dash, Input, Output, State, no_update

from runners.eval_viewer.controls.data import epoch_state
from runners.eval_viewer.controls.ids import (
    EPOCH_BADGES,
    EPOCH_SELECT,
    METRIC_SELECT,
    REFRESH,
    RUN_SELECT,
    VIEW_BUILT_FROM,
)
from runners.eval_viewer.failures.data import narrowed_idx
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import BadRequest, paging
from runners.eval_viewer.shared.feature import Feature
from runners.eval_viewer.shared.row_grids import answer, apply_answer_script
from runners.eval_viewer.shared.table import TABLE_ERRORS
from runners.eval_viewer.table import filters, selection
from runners.eval_viewer.table.data import table_rows
from runners.eval_viewer.table.ids import (
    SENDS,
    TABLE,
    TABLE_CAPTION,
    TABLE_CLEAR_FILTERS,
    TABLE_IDX_FILTER,
    TABLE_QUERY,
    TABLE_ROWS,
    WRONG_ONLY,
)
from runners.eval_viewer.table.view import caption, epoch_view


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(METRIC_SELECT, "options"), Output(METRIC_SELECT, "value"),
                  Output(EPOCH_BADGES, "children"), Output(TABLE_QUERY, "data"),
                  Output(TABLE, "columnDefs"), Output(VIEW_BUILT_FROM, "data"),
                  Input(EPOCH_SELECT, "value"), Input(METRIC_SELECT, "value"),
                  Input(REFRESH, "data"), Input(TABLE_IDX_FILTER, "data"), Input(WRONG_ONLY, "value"),
                  State(RUN_SELECT, "value"), State(TABLE_QUERY, "data"), prevent_initial_call=True)
    def choose_rows(epoch_key: Optional[str], metric: Optional[str], _: Optional[int], narrowed: Optional[dict],
                    wrong: Optional[list], run_path: Optional[str], previous: Optional[dict]) -> tuple:
        """Everything that follows the chosen epoch, in one step: the metric, the epoch's badges, and the table's
        query (with the epoch's version) and columns. A run switch reaches it once, through the epoch
        (``refresh_epochs`` always sends the new run's epoch); the query then says to clear the filters, which
        would silently empty the next epoch's table. A refresh that finds nothing new changes nothing shown. The disk
        state the view is built from goes to the page (``assets/refresh.js``: a change between a switch and the
        page's next question is a change)."""
        built_from = {"key": [run_path, epoch_key], "epoch": epoch_state(backend, run_path, epoch_key)}
        view = epoch_view(backend, run_path, epoch_key, metric, narrowed_idx(narrowed, run_path, epoch_key),
                          wrong=bool(wrong))
        previous = {key: value for key, value in (previous or {}).items() if key != "clear"}
        same_epoch = (previous.get("run"), previous.get("epoch")) == (run_path, epoch_key)
        if view.query == previous:
            return (*(no_update,) * 5, built_from)
        same_columns = same_epoch and all(previous.get(key) == view.query.get(key) for key in ("metric", "version"))
        return (view.metrics, view.metric, view.badges, {**view.query, "clear": not same_epoch},
                no_update if same_columns else view.columns, built_from)

    app.clientside_callback(
        """function(query) {
            // One place resets the table, in order: filters first (when the query says so), then the rows.
            // The grid's next request therefore carries the cleared filter and the new query.
            const api = window.dash_ag_grid && dash_ag_grid.getApi('TABLE');
            if (api) {
                if (query && query.clear) { api.setFilterModel(null); }
                api.purgeInfiniteCache();
            }
            return window.dash_clientside.no_update;
        }""".replace("TABLE", TABLE),
        Output(TABLE, "id"), Input(TABLE_QUERY, "data"), prevent_initial_call=True)

    app.clientside_callback(  # Clear filters, in the browser: as a server call, a refresh tick that came before
        # its answer made Dash drop it (the newer call cannot tell that the button was clicked)
        """function(clicks) {
            const api = window.dash_ag_grid && dash_ag_grid.getApi('TABLE');
            if (api && clicks) { api.setFilterModel(null); window.dash_clientside.set_props('WRONG', {value: []}); }
            return window.dash_clientside.no_update;
        }""".replace("TABLE", TABLE).replace("WRONG", WRONG_ONLY),
        Output(TABLE_CLEAR_FILTERS, "id"), Input(TABLE_CLEAR_FILTERS, "n_clicks"), prevent_initial_call=True)

    @app.callback(Output(TABLE_ROWS, "data"), Output(TABLE_CAPTION, "children"),
                  Input(TABLE, "getRowsRequest"), State(TABLE_QUERY, "data"), prevent_initial_call=True)
    def serve_rows(request: Optional[dict], query: Optional[dict]) -> tuple:
        if not request:
            return no_update, no_update
        try:
            asked = paging(request)
            rows, count, total, label = table_rows(backend, query or {}, asked)
        except (*TABLE_ERRORS, BadRequest) as exc:
            return answer([], 0, request), str(exc)
        return answer(rows, count, request), caption(label, count, total, query or {}, asked)
    app.clientside_callback(apply_answer_script(TABLE), Output(TABLE, "id", allow_duplicate=True),
                            Input(TABLE_ROWS, "data"), prevent_initial_call=True)
    filters.register(app)
    selection.register(app)


FEATURE = Feature(register, SENDS)
