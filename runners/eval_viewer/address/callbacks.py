"""The whole view in the address bar, and named views of a run saved under a name.

The address records run, epoch, open datapoint, tab, metric, the table's sort (``-`` for highest first), its typed
filters (``f.<column>=<text>``), "wrong only", a narrowing (a Failures finding by its name, ``narrow=slice-0``, or a
box or lasso on the Embeddings map), the comparisons' choices, the shown tab's own choices (the map's space and
colour, the runs side by side) and the pinned and hidden columns; the page is built from it (``page.py``), so a
link or a reload opens the same view. A view saved under a name (``saved_views.py``) is that address;
choosing it opens it.
"""

from __future__ import annotations

from typing import Optional
from urllib.parse import parse_qs

from dash import Dash, Input, Output, State

from runners.eval_viewer.address.ids import (
    SAVE_VIEW,
    SAVE_VIEW_ASKED,
    SAVED_VIEWS,
    SENDS,
    URL_STATE,
    VIEW_NAME,
    VIEW_NOTE,
)
from runners.eval_viewer.address.saved_views import FILTER_PREFIX, SavedViewsError
from runners.eval_viewer.address.view import view_options
from runners.eval_viewer.compare_epochs.ids import COMPARE_EPOCHS_SELECT
from runners.eval_viewer.compare_runs.ids import COMPARE_RUN_EPOCH_SELECT, COMPARE_RUN_SELECT
from runners.eval_viewer.controls.ids import EPOCH_SELECT, FOLLOW_LATEST, METRIC_SELECT, RUN_SELECT
from runners.eval_viewer.embeddings.ids import EMBEDDING_COLOUR, EMBEDDING_SPACE, TAB_EMBEDDINGS
from runners.eval_viewer.many_runs.ids import RUNS_CHOSEN, TAB_RUNS
from runners.eval_viewer.shared import opened
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.feature import Feature
from runners.eval_viewer.shared.ids import SELECTED, TABS
from runners.eval_viewer.table.ids import COLUMNS_PINNED, COLUMNS_SHOWN, TABLE, TABLE_IDX_FILTER, WRONG_ONLY

# The address is written from the page's state (read from Dash's layout, not as callback inputs): Dash holds back a
# callback while a pending one writes any of its inputs, and one writer with them all would wait on every server
# answer (a Failures finding's, held on a slow machine, kept a run switch out of the address). So each part of the
# view triggers its own copy of the writer.
_WRITE = """function() {
    const props = id => ((window.dash_component_api.getLayout(id) || {}).props || {});
    const run = props('RUN').value, epoch = props('EPOCH').value, tab = props('TABS').value;
    const request = props('TABLE').getRowsRequest || {}, narrowed = props('NARROWING').data;
    const shown = props('SHOWN').value || [], columns = props('SHOWN').options || [];
    const params = new URLSearchParams();
    const set = (key, value) => {
        if (value !== null && value !== undefined && value !== '') { params.append(key, value); }
    };
    set('run', run); set('epoch', epoch); set('idx', props('SELECTED').data); set('tab', tab);
    set('metric', props('METRIC').value);
    const sort = (request.sortModel || [])[0];
    if (sort) { set('sort', (sort.sort === 'desc' ? '-' : '') + sort.colId); }
    Object.entries(request.filterModel || {}).forEach(([column, condition]) =>
        set('FILTER' + column, {blank: 'blank', notBlank: 'not blank'}[condition.type] || condition.filter));
    if ((props('WRONG').value || []).length) { set('wrong', '1'); }
    if ((props('FOLLOW').value || []).length) { set('follow', '1'); }
    if (narrowed && narrowed.finding && narrowed.run === run && narrowed.epoch === epoch) {
        set('narrow', narrowed.finding);
    }
    (props('COMPARED').value || []).forEach(key => set('cmp_epochs', key));
    if (props('OTHER_RUN').value) {
        set('cmp_run', props('OTHER_RUN').value);
        set('cmp_epoch', props('OTHER_EPOCH').value);
    }
    if (tab === 'TAB_RUNS') { (props('RUNS_CHOSEN').value || []).forEach(path => set('runs', path)); }
    if (tab === 'TAB_EMBEDDINGS') {
        set('map_space', props('MAP_SPACE').value);
        set('map_colour', props('MAP_COLOUR').value);
    }
    (props('PINNED').value || []).forEach(name => set('pin', name));
    columns.map(o => o.value === undefined ? o : o.value).filter(n => !shown.includes(n)).forEach(n => set('hide', n));
    const search = '?' + params.toString();
    if (search !== window.location.search) { window.history.replaceState(null, '', search); }
    return window.dash_clientside.no_update;
}"""
_PARTS = {"RUN": (RUN_SELECT, "value"), "EPOCH": (EPOCH_SELECT, "value"), "SELECTED": (SELECTED, "data"),
          "TABS": (TABS, "value"), "TABLE": (TABLE, "getRowsRequest"), "WRONG": (WRONG_ONLY, "value"),
          "NARROWING": (TABLE_IDX_FILTER, "data"), "COMPARED": (COMPARE_EPOCHS_SELECT, "value"),
          "OTHER_RUN": (COMPARE_RUN_SELECT, "value"), "OTHER_EPOCH": (COMPARE_RUN_EPOCH_SELECT, "value"),
          "PINNED": (COLUMNS_PINNED, "value"), "SHOWN": (COLUMNS_SHOWN, "value"),
          "METRIC": (METRIC_SELECT, "value"), "FOLLOW": (FOLLOW_LATEST, "value"),
          "RUNS_CHOSEN": (RUNS_CHOSEN, "value"), "MAP_SPACE": (EMBEDDING_SPACE, "value"),
          "MAP_COLOUR": (EMBEDDING_COLOUR, "value")}
for _name, (_id, _) in sorted(_PARTS.items(), key=lambda part: -len(part[0])):  # OTHER_RUN before RUN
    _WRITE = _WRITE.replace(f"'{_name}'", f"'{_id}'")
_WRITE = _WRITE.replace("FILTER", FILTER_PREFIX).replace("TAB_RUNS", TAB_RUNS).replace("TAB_EMBEDDINGS", TAB_EMBEDDINGS)
# Save: the browser hands the address to the server with the name typed (the address is not a Dash property).
_ASK_SAVE = """function(clicks, name) {
    const asked = {name: name || '', address: window.location.search, at: Date.now()};
    return clicks ? asked : window.dash_clientside.no_update;
}"""
_OPEN = """function(address) {
    if (address && ('?' + address) !== window.location.search) { window.location.search = address; }
    return window.dash_clientside.no_update;
}"""


def register(app: Dash, backend: ViewerBackend) -> None:
    for component, prop in _PARTS.values():  # but the metric (its switch asks the table for rows, which writes it)
        if component not in (METRIC_SELECT, SELECTED):  # and the open idx: a follow-up of an open datapoint writes it
            app.clientside_callback(_WRITE, Output(URL_STATE, "data", allow_duplicate=True),
                                    Input(component, prop), prevent_initial_call=True)
    opened.follow(app, _WRITE)
    app.clientside_callback(_ASK_SAVE, Output(SAVE_VIEW_ASKED, "data"), Input(SAVE_VIEW, "n_clicks"),
                            State(VIEW_NAME, "value"), prevent_initial_call=True)
    app.clientside_callback(_OPEN, Output(SAVED_VIEWS, "id"), Input(SAVED_VIEWS, "value"),
                            prevent_initial_call=True)

    @app.callback(Output(SAVED_VIEWS, "options"), Output(VIEW_NOTE, "children"),
                  Input(SAVE_VIEW_ASKED, "data"), Input(RUN_SELECT, "value"), prevent_initial_call=True)
    def saved_views(asked: Optional[dict], run_path: Optional[str]) -> tuple:
        """The run's views; with a save asked for (a name and the address) since the run was chosen, saved first."""
        note = ""
        run = backend.run(run_path)
        if isinstance(asked, dict) and run is not None and _for_run(asked, run.path):
            try:
                name = backend.views.save(run.path, asked.get("name"), str(asked.get("address", "")))
                note = f"saved as '{name}'"
            except SavedViewsError as exc:
                note = f"not saved: {exc}"
        if run is None:
            return [], ""
        options, problem = view_options(backend, run.path)
        return options, problem or note


def _for_run(asked: dict, run_path: str) -> bool:
    """Whether a save asked for is of ``run_path`` (its address names that run), not one made before a run switch."""
    return parse_qs(str(asked.get("address", "")).lstrip("?")).get("run", [None])[-1] == run_path


FEATURE = Feature(register, SENDS)
