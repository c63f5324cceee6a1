"""The table's filters as the user sees them: chips above the table, one per active filter (a typed box, "wrong
only", a Failures narrowing), each removable; the "wrong only" tick box; the column chooser (shown and pinned
columns). All in the browser: nothing here asks the server (the rows follow the filters through the grid's own
request and the table's query, ``table/callbacks.py``)."""

from __future__ import annotations

from dash import ALL, Dash, Input, Output, State

from runners.eval_viewer.embeddings.data import PREFIX as MAP_SELECTION
from runners.eval_viewer.table.ids import (
    COLUMNS_PINNED,
    COLUMNS_SHOWN,
    FILTER_CHIP,
    FILTER_CHIPS,
    TABLE,
    TABLE_IDX_FILTER,
    WRONG_ONLY,
)

# One chip per filter: a typed box ('cross_entropy: > 2'), 'wrong only', the narrowing to a finding. The text is
# React text, never markup.
_CHIPS = """function(model, wrong, narrowed) {
    const chips = Object.entries(model || {}).map(([column, condition]) => [`col:${column}`, `${column}: ` +
        ({blank: 'blank', notBlank: 'not blank'}[condition.type] || String(condition.filter))]);
    if ((wrong || []).length) { chips.push(['wrong', 'wrong only (label ≠ prediction)']); }
    if (narrowed && narrowed.idx) {
        const kind = String(narrowed.finding || '').startsWith('MAP') ? 'map' : 'finding';
        chips.push(['narrowing', `${kind}: ${narrowed.what || narrowed.idx.length + ' datapoints'}`]);
    }
    return chips.map(([key, text]) => ({type: 'Button', namespace: 'dash_html_components', props: {
        id: {type: 'CHIP', index: key}, children: `${text} ×`, className: 'filter-chip',
        title: 'remove this filter'}}));
}""".replace("CHIP", FILTER_CHIP).replace("MAP", MAP_SELECTION)
_REMOVE = """function(clicks) {
    const none = window.dash_clientside.no_update;
    const fired = window.dash_clientside.callback_context.triggered.filter(t => t.value);
    if (!fired.length) { return none; }
    const key = JSON.parse(fired[0].prop_id.slice(0, fired[0].prop_id.lastIndexOf('.'))).index;
    if (key === 'wrong') { window.dash_clientside.set_props('WRONG_ONLY', {value: []}); }
    else if (key === 'narrowing') { window.dash_clientside.set_props('NARROWING', {data: null}); }
    else {
        const api = dash_ag_grid.getApi('TABLE');
        api.setColumnFilterModel(key.slice(4), null).then(() => api.onFilterChanged());
    }
    return none;
}""".replace("WRONG_ONLY", WRONG_ONLY).replace("NARROWING", TABLE_IDX_FILTER).replace("TABLE", TABLE)
# The chooser lists the table's columns; a choice stays while the columns do (a new column is shown).
_CHOOSER_OPTIONS = """function(defs, shown, offered) {
    const names = (defs || []).map(d => d.field).filter(Boolean);
    const known = new Set((offered || []).map(o => o.value));
    const kept = (shown || []).filter(n => names.includes(n)).concat(names.filter(n => !known.has(n)));
    const options = names.map(n => ({label: n, value: n}));
    return [options, names.filter(n => kept.includes(n)), options];
}"""
_APPLY_COLUMNS = """function(shown, pinned) {
    let api = null;
    try { api = dash_ag_grid.getApi('TABLE'); } catch (error) { return window.dash_clientside.no_update; }
    const names = api.getColumnDefs().map(d => d.field).filter(Boolean);
    api.setColumnsVisible(names.filter(n => !(shown || []).includes(n)), false);
    api.setColumnsVisible(names.filter(n => (shown || []).includes(n)), true);
    api.setColumnsPinned(names, null);
    api.setColumnsPinned((pinned || []).filter(n => names.includes(n)), 'left');
    (pinned || []).forEach(n => api.setColumnsVisible([n], true));
    return window.dash_clientside.no_update;
}""".replace("TABLE", TABLE)


def register(app: Dash) -> None:
    app.clientside_callback(_CHIPS, Output(FILTER_CHIPS, "children"), Input(TABLE, "filterModel"),
                            Input(WRONG_ONLY, "value"), Input(TABLE_IDX_FILTER, "data"))
    app.clientside_callback(_REMOVE, Output(FILTER_CHIPS, "id"),
                            Input({"type": FILTER_CHIP, "index": ALL}, "n_clicks"), prevent_initial_call=True)
    app.clientside_callback(_CHOOSER_OPTIONS, Output(COLUMNS_SHOWN, "options"),
                            Output(COLUMNS_SHOWN, "value"), Output(COLUMNS_PINNED, "options"),
                            Input(TABLE, "columnDefs"), State(COLUMNS_SHOWN, "value"),
                            State(COLUMNS_SHOWN, "options"), prevent_initial_call=True)
    app.clientside_callback(_APPLY_COLUMNS, Output(COLUMNS_PINNED, "id"), Input(COLUMNS_SHOWN, "value"),
                            Input(COLUMNS_PINNED, "value"), prevent_initial_call=True)
