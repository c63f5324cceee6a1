"""The Runs tab's callbacks: the runs chosen drawn while the tab is shown (and again when the page's refresh finds the
runs on disk changed, ticks passed on only while it is shown), a row clicked opening its run, the open run's row
marked."""

from __future__ import annotations

from typing import Any, Optional

from dash import Dash, Input, Output, State, no_update

from runners.eval_viewer.controls.ids import REFRESH, RUN_SELECT
from runners.eval_viewer.many_runs.ids import (
    RUNS_CHOSEN,
    RUNS_CURVES,
    RUNS_NOTE,
    RUNS_TABLE,
    RUNS_TICK,
    SENDS,
    TAB_RUNS,
)
from runners.eval_viewer.many_runs.view import run_options, runs_content, runs_tab
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.feature import Feature, Tab
from runners.eval_viewer.shared.ids import TABS

_OPEN_RUN = """function(cell) {
    // A row clicked: its run opens (the whole page follows the run picker).
    const path = (cell || {}).rowId;
    return typeof path === 'string' && path ? path : window.dash_clientside.no_update;
}"""
_MARK_OPEN_RUN = """function(run) {
    let api = null;
    try { api = dash_ag_grid.getApi('TABLE'); } catch (error) { return window.dash_clientside.no_update; }
    api.getGridOption('context').open = run;
    api.redrawRows();
    return window.dash_clientside.no_update;
}""".replace("TABLE", RUNS_TABLE)


def register(app: Dash, backend: ViewerBackend) -> None:
    app.clientside_callback(  # the refresh tick, passed on only while the tab is shown
        f"""function(tick, tab) {{ return tab === '{TAB_RUNS}' ? tick : window.dash_clientside.no_update; }}""",
        Output(RUNS_TICK, "data"), Input(REFRESH, "data"), State(TABS, "value"), prevent_initial_call=True)

    @app.callback(Output(RUNS_NOTE, "children"), Output(RUNS_CURVES, "figure"), Output(RUNS_TABLE, "columnDefs"),
                  Output(RUNS_TABLE, "rowData"), Output(RUNS_CHOSEN, "options"), Input(TABS, "value"),
                  Input(RUNS_CHOSEN, "value"), Input(RUNS_TICK, "data"),
                  prevent_initial_call=True)  # a first page on this tab comes drawn (view.runs_tab)
    def show_runs(tab: Optional[str], chosen: Optional[list], _: Any) -> tuple:
        if tab != TAB_RUNS:
            return (no_update,) * 5
        content = runs_content(backend, chosen)
        return content.note, content.figure, content.columns, content.rows, run_options(backend)

    app.clientside_callback(_OPEN_RUN, Output(RUN_SELECT, "value", allow_duplicate=True),
                            Input(RUNS_TABLE, "cellClicked"), prevent_initial_call=True)
    app.clientside_callback(_MARK_OPEN_RUN, Output(RUNS_TABLE, "id"), Input(RUN_SELECT, "value"),
                            prevent_initial_call=True)


FEATURE = Feature(register, SENDS, Tab(TAB_RUNS, runs_tab))
