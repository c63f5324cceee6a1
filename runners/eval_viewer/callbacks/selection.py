"""Which datapoint is open: a clicked table row or grid cell, the prev/next buttons (keys ``k``/``j``), the URL.

``SELECTED`` holds the open idx; ``SELECTED_ROW`` its row in the table when known,
so prev/next walk the table in its current filter and sort. The address bar
records run, epoch, datapoint and tab (``?run=...&epoch=...&idx=...&tab=...``): a
link or a reload opens the same view.
"""

from __future__ import annotations

from typing import Optional

from dash import Dash, Input, Output, State, ctx, no_update

from runners.eval_viewer.backend.table import TABLE_ERRORS
from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.callbacks.table import table_rows
from runners.eval_viewer.layout import ids

_READ_URL = """function(_) {
    const params = new URLSearchParams(window.location.search);
    const idx = params.get('idx');
    return {run: params.get('run'), epoch: params.get('epoch'), tab: params.get('tab'),
            idx: idx !== null && /^[0-9]+$/.test(idx) ? parseInt(idx) : null};
}"""
_WRITE_URL = """function(run, epoch, idx, tab) {
    const params = new URLSearchParams();
    if (run) { params.set('run', run); }
    if (epoch) { params.set('epoch', epoch); }
    if (idx !== null && idx !== undefined) { params.set('idx', idx); }
    if (tab) { params.set('tab', tab); }
    const search = '?' + params.toString();
    if (search !== window.location.search) { window.history.replaceState(null, '', search); }
    return window.dash_clientside.no_update;
}"""


def register(app: Dash, backend: ViewerBackend) -> None:
    app.clientside_callback(_READ_URL, Output(ids.URL_STATE, "data"), Input(ids.URL_STATE, "id"))
    app.clientside_callback(_WRITE_URL, Output(ids.URL_STATE, "id"), Input(ids.RUN_SELECT, "value"),
                            Input(ids.EPOCH_SELECT, "value"), Input(ids.SELECTED, "data"), Input(ids.TABS, "value"),
                            prevent_initial_call=True)

    @app.callback(Output(ids.TABS, "value"), Output(ids.SELECTED, "data", allow_duplicate=True),
                  Input(ids.URL_STATE, "data"), prevent_initial_call=True)
    def open_from_url(state: Optional[dict]) -> tuple:
        state = state or {}
        tab = state.get("tab") if state.get("tab") in ids.TAB_VALUES else no_update
        return tab, no_update if state.get("idx") is None else state["idx"]

    @app.callback(Output(ids.SELECTED, "data"), Output(ids.SELECTED_ROW, "data"),
                  Input(ids.TABLE, "cellClicked"), Input(ids.SCORE_GRID, "clickData"),
                  Input(ids.PREV_BUTTON, "n_clicks"), Input(ids.NEXT_BUTTON, "n_clicks"),
                  State(ids.SELECTED_ROW, "data"), State(ids.TABLE_QUERY, "data"), State(ids.TABLE, "getRowsRequest"),
                  prevent_initial_call=True)
    def select_datapoint(cell: Optional[dict], click: Optional[dict], _prev: Optional[int], _next: Optional[int],
                         row: Optional[int], query: Optional[dict], request: Optional[dict]) -> tuple:
        if ctx.triggered_id == ids.TABLE:
            return _from_table(cell)
        if ctx.triggered_id == ids.SCORE_GRID:
            idx = _from_grid(click)
            return (no_update, no_update) if idx is None else (idx, None)
        step = -1 if ctx.triggered_id == ids.PREV_BUTTON else 1
        return neighbour(backend, query or {}, request or {}, row, step)


def neighbour(backend: ViewerBackend, query: dict, request: dict, row: Optional[int], step: int) -> tuple:
    """The datapoint ``step`` rows away in the table as it is filtered and sorted; the first row when the open
    datapoint's row is unknown (opened from the grid or a link)."""
    target = 0 if row is None else max(row + step, 0)
    try:
        rows, count, _, _ = table_rows(backend, query, request, target, target + 1)
    except TABLE_ERRORS:
        return no_update, no_update
    return (rows[0]["idx"], target) if rows and target < count else (no_update, no_update)


def _from_table(cell: Optional[dict]) -> tuple:
    row_id, row = str((cell or {}).get("rowId")), (cell or {}).get("rowIndex")
    return (int(row_id), row) if row_id.isdigit() else (no_update, no_update)


def _from_grid(click: Optional[dict]) -> Optional[int]:
    points = (click or {}).get("points") or [{}]
    idx = points[0].get("customdata")
    return None if idx is None or idx < 0 else int(idx)
