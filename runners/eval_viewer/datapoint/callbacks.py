"""The Datapoint tab's callback: the open datapoint drawn (a kept panel where one is), its neighbours in the table
drawn ahead, and the status line saying "loading" until the panel shows the datapoint asked for."""

from __future__ import annotations

from typing import Optional

from dash import Dash, Input, Output, State, no_update

from runners.eval_viewer.controls.ids import EPOCH_SELECT, RUN_SELECT
from runners.eval_viewer.datapoint.ids import (
    DATAPOINT_DRAWN,
    DATAPOINT_PANEL,
    DATAPOINT_STATUS,
    DEBUGGER_PICK,
    SENDS,
    TAB_DATAPOINT,
)
from runners.eval_viewer.datapoint.view import Panels, datapoint_tab, shown_debuggers
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import BadRequest, datapoint_idx, storable
from runners.eval_viewer.shared.components import (
    message,
)
from runners.eval_viewer.shared.feature import Feature, Tab
from runners.eval_viewer.shared.ids import SELECTED, SELECTED_ROW, TABS
from runners.eval_viewer.shared.opened import follow_status
from runners.eval_viewer.table.ids import TABLE, TABLE_QUERY


def register(app: Dash, backend: ViewerBackend) -> None:
    panels = Panels(backend)

    @app.callback(Output(DATAPOINT_PANEL, "children"), Output(DEBUGGER_PICK, "options"),
                  Output(DEBUGGER_PICK, "value"), Output(DATAPOINT_DRAWN, "data"),
                  Output(DATAPOINT_STATUS, "children"),
                  Input(SELECTED, "data"), Input(EPOCH_SELECT, "value"), Input(TABS, "value"),
                  Input(DEBUGGER_PICK, "value"), State(DEBUGGER_PICK, "options"),
                  State(RUN_SELECT, "value"), State(SELECTED_ROW, "data"),
                  State(TABLE_QUERY, "data"), State(TABLE, "getRowsRequest"), prevent_initial_call=True)
    def show_datapoint(idx: Optional[int], epoch_key: Optional[str], tab: str, chosen: Optional[list[str]],
                       offered: Optional[list], run_path: Optional[str], row: Optional[int], query: Optional[dict],
                       request: Optional[dict]) -> tuple:
        """A run switch reaches this through the epoch (always sent on a switch), so it draws once. The tick
        boxes are sent only when they change (moving through a run's datapoints they do not). The first page
        comes with its panel (``view.datapoint_tab``). ``DATAPOINT_DRAWN`` says what the panel shows
        (``shared/pending.py``)."""
        if tab != TAB_DATAPOINT:
            return no_update, no_update, no_update, no_update, no_update
        drawn = storable([idx, run_path, epoch_key])
        try:
            panel = panels.get(run_path, epoch_key, datapoint_idx(idx), chosen)
        except BadRequest as exc:
            return message(str(exc), "warning"), no_update, no_update, drawn, ""
        if query and idx is not None:
            panels.draw_ahead(query, request or {}, row, chosen)
        if not panel.debuggers:
            return panel.body, no_update, no_update, drawn, ""
        shown = shown_debuggers(list(panel.debuggers), chosen)
        return (panel.body, no_update if offered == list(panel.debuggers) else list(panel.debuggers),
                no_update if shown == chosen else shown, drawn, "")

    follow_status(app, TAB_DATAPOINT, DATAPOINT_STATUS, DATAPOINT_DRAWN,
                  [(RUN_SELECT, "value"), (EPOCH_SELECT, "value")])


FEATURE = Feature(register, SENDS, Tab(TAB_DATAPOINT, datapoint_tab))
