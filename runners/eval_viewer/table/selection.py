"""Which datapoint is open: a clicked table row, the prev/next buttons (keys ``k``/``j``), a clicked grid cell
(set by ``assets/score_views.js``, which draws the grid).

``SELECTED`` holds the open idx; prev/next look it up among the table's loaded rows (else ``SELECTED_ROW``, its
row when it was opened), so they walk the table in its current filter and sort; past
its first or last row they say so (``NAVIGATION_NOTE``). The open datapoint's row is marked in the table
however it was opened. All of it runs in the browser (the grid already holds the neighbouring rows), so a key
press costs no server round trip before the datapoint is asked for. The address bar records the view
(``address/callbacks.py``)."""

from __future__ import annotations

import json

from dash import Dash, Input, Output, State

from runners.eval_viewer.shared import opened
from runners.eval_viewer.shared.ids import SELECTED, SELECTED_ROW
from runners.eval_viewer.table.ids import (
    NAVIGATION_NOTE,
    NEXT_BUTTON,
    PREV_BUTTON,
    TABLE,
    TABLE_IDX_FILTER,
    TABLE_QUERY,
    TABLE_ROWS,
)

_MARK_OPEN_ROW = """function(idx) {
    // A datapoint opened: the note of a step past the table's end goes (where there is one), and its row is
    // marked. The grid's rowClassRules mark the row whose idx is the context's (table/view.py); only the rows of
    // the datapoint closed and the one opened are drawn again.
    const note = ((window.dash_component_api.getLayout('NOTE') || {}).props || {}).children;
    const cleared = note ? '' : window.dash_clientside.no_update;
    let api = null;
    try { api = dash_ag_grid.getApi('TABLE'); } catch (error) { return cleared; }
    const context = api.getGridOption('context');
    const node = open => (open === null || open === undefined ? null : api.getRowNode('' + open));
    const rows = [node(context.open), node(idx)].filter(Boolean);
    context.open = idx === undefined ? null : idx;
    api.redrawRows({rowNodes: rows});
    return cleared;
}""".replace("TABLE", TABLE).replace("NOTE", NAVIGATION_NOTE)

# Whether the table's rows are not yet those asked for: a narrowing (a Failures finding) was written and the table's
# query (what its rows are of) does not have it yet. Read from the page's state, not as a callback's State: Dash holds
# back a callback whose State a pending callback writes, and would then apply a click on the old rows to the new ones.
_STALE = """function tableIsStale() {
    const props = id => ((window.dash_component_api.getLayout(id) || {}).props || {}).data;
    const narrowed = props('NARROWING'), query = props('QUERY') || {};
    const wanted = narrowed && narrowed.run === query.run && narrowed.epoch === query.epoch ? narrowed.idx : null;
    return JSON.stringify(wanted || null) !== JSON.stringify(query.idx || null);
}""".replace("NARROWING", TABLE_IDX_FILTER).replace("QUERY", TABLE_QUERY)
STALE_NOTE = "The table is loading the datapoints asked for: open one once it shows them."

_SELECT = """function(cell, _previous, _next, row, open) {
    const none = window.dash_clientside.no_update;
    const trigger = (window.dash_clientside.callback_context.triggered[0] || {}).prop_id || '';
    STALE
    if (tableIsStale()) { return [none, none, NOTE]; }
    if (trigger.startsWith('TABLE.')) {
        const id = String((cell || {}).rowId);
        return /^[0-9]+$/.test(id) ? [parseInt(id), cell.rowIndex, none] : [none, none, none];
    }
    // previous / next: the neighbouring row of the table as it is filtered and sorted now. The open datapoint is
    // looked up among the rows the table holds (it may have been opened elsewhere: the grid, the address of a
    // reloaded page; or sorted since); else its row when it was opened; else the first row. A row not loaded yet
    // is scrolled to and loads; past either end, a note.
    let api = null;
    try { api = dash_ag_grid.getApi('TABLE'); } catch (error) { return [none, none, none]; }
    const step = trigger.startsWith('PREVIOUS.') ? -1 : 1;
    const shown = open === null || open === undefined ? null : api.getRowNode('' + open);
    const at = shown && shown.rowIndex !== null ? shown.rowIndex : (row !== null && row !== undefined ? row : null);
    const target = at === null ? 0 : at + step;
    const count = api.getDisplayedRowCount();
    if (count === 0) { return [none, none, 'The table shows no datapoint: clear its filters to step through them.']; }
    if (target < 0 || target >= count) {
        return [none, none, `Datapoint ${open} is the table's ${step > 0 ? 'last' : 'first'} row: there is no ` +
                            `${step > 0 ? 'next' : 'previous'} one.`];
    }
    api.ensureIndexVisible(target);
    const node = api.getDisplayedRowAtIndex(target);
    return node && node.data ? [node.data.idx, target, none] : [none, none, none];
}""".replace("STALE", _STALE).replace("NOTE", json.dumps(STALE_NOTE)).replace("TABLE", TABLE) \
    .replace("PREVIOUS", PREV_BUTTON)

# The table shows AG Grid's loading overlay from when a narrowing is asked for until its rows land.
_LOADING = """function() {
    STALE
    let api = null;
    try { api = dash_ag_grid.getApi('TABLE'); } catch (error) { return window.dash_clientside.no_update; }
    api.setGridOption('loading', tableIsStale());
    return window.dash_clientside.no_update;
}""".replace("STALE", _STALE).replace("TABLE", TABLE)


def register(app: Dash) -> None:
    app.clientside_callback(_SELECT, Output(SELECTED, "data"), Output(SELECTED_ROW, "data"),
                            Output(NAVIGATION_NOTE, "children"), Input(TABLE, "cellClicked"),
                            Input(PREV_BUTTON, "n_clicks"), Input(NEXT_BUTTON, "n_clicks"),
                            State(SELECTED_ROW, "data"), State(SELECTED, "data"), prevent_initial_call=True)
    app.clientside_callback(_LOADING, Output(TABLE, "className"), Input(TABLE_IDX_FILTER, "data"),
                            Input(TABLE_ROWS, "data"), prevent_initial_call=True)
    opened.follow(app, _MARK_OPEN_ROW, (NAVIGATION_NOTE, "children"))  # the first page's comes marked
