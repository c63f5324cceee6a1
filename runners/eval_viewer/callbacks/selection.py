"""Which datapoint is open: a clicked table row, the prev/next buttons (keys ``k``/``j``), a clicked grid cell
(set by ``assets/score_views.js``, which draws the grid).

``SELECTED`` holds the open idx; ``SELECTED_ROW`` its row in the table when known (else prev/next look the
open idx up among the table's loaded rows), so prev/next walk the table in its current filter and sort.
All of it runs in the browser (the grid already holds the neighbouring rows), so a key press costs no server round
trip before the datapoint is asked for. The address bar records run, epoch, datapoint
and tab (``?run=...&epoch=...&idx=...&tab=...``); the page is built from it
(``layout/page.py``), so a link or a reload opens the same view.
"""

from __future__ import annotations

from dash import Dash, Input, Output, State

from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.layout import ids

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

_SELECT = """function(cell, _previous, _next, row, open) {
    const none = window.dash_clientside.no_update;
    const trigger = (window.dash_clientside.callback_context.triggered[0] || {}).prop_id || '';
    if (trigger.startsWith('TABLE.')) {
        const id = String((cell || {}).rowId);
        return /^[0-9]+$/.test(id) ? [parseInt(id), cell.rowIndex] : [none, none];
    }
    // previous / next: the neighbouring row of the table as it is filtered and sorted. A datapoint opened
    // elsewhere (the grid, the address of a reloaded page) is looked up among the rows the table holds; the
    // first row when it is not there. A row not loaded yet is scrolled to and loads.
    let api = null;
    try { api = dash_ag_grid.getApi('TABLE'); } catch (error) { return [none, none]; }
    const step = trigger.startsWith('PREVIOUS.') ? -1 : 1;
    const shown = open === null || open === undefined ? null : api.getRowNode('' + open);
    const at = row !== null && row !== undefined ? row : (shown && shown.rowIndex !== null ? shown.rowIndex : null);
    const target = at === null ? 0 : Math.max(at + step, 0);
    if (target >= api.getDisplayedRowCount()) { return [none, none]; }
    api.ensureIndexVisible(target);
    const node = api.getDisplayedRowAtIndex(target);
    return node && node.data ? [node.data.idx, target] : [none, none];
}""".replace("TABLE", ids.TABLE).replace("PREVIOUS", ids.PREV_BUTTON)


def register(app: Dash, backend: ViewerBackend) -> None:
    app.clientside_callback(_WRITE_URL, Output(ids.URL_STATE, "id"), Input(ids.RUN_SELECT, "value"),
                            Input(ids.EPOCH_SELECT, "value"), Input(ids.SELECTED, "data"), Input(ids.TABS, "value"),
                            prevent_initial_call=True)
    app.clientside_callback(_SELECT, Output(ids.SELECTED, "data"), Output(ids.SELECTED_ROW, "data"),
                            Input(ids.TABLE, "cellClicked"),
                            Input(ids.PREV_BUTTON, "n_clicks"), Input(ids.NEXT_BUTTON, "n_clicks"),
                            State(ids.SELECTED_ROW, "data"), State(ids.SELECTED, "data"), prevent_initial_call=True)
