"""The Compare epochs tab's callbacks: the epochs offered follow the run, and the panel is drawn while the tab is
shown, once per datapoint, run and epochs (the open datapoint reaches it through a store the browser writes only
then, ``opened.follow_while_shown``)."""

from __future__ import annotations

from typing import Optional

from dash import Dash, Input, Output, State, no_update

from runners.eval_viewer.compare_epochs.ids import (
    COMPARE_EPOCHS_DRAWN,
    COMPARE_EPOCHS_NOTE,
    COMPARE_EPOCHS_PANEL,
    COMPARE_EPOCHS_SELECT,
    COMPARE_EPOCHS_SHOWN,
    COMPARE_EPOCHS_STATUS,
    SENDS,
    TAB_COMPARE_EPOCHS,
)
from runners.eval_viewer.compare_epochs.view import compare_epochs_tab, epoch_columns, epochs_to_compare
from runners.eval_viewer.controls.ids import EPOCH_SELECT, RUN_SELECT
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import BadRequest, datapoint_idx, storable
from runners.eval_viewer.shared.components import message
from runners.eval_viewer.shared.feature import Feature, Tab
from runners.eval_viewer.shared.ids import TABS
from runners.eval_viewer.shared.opened import follow_status, follow_while_shown


def register(app: Dash, backend: ViewerBackend) -> None:
    follow_while_shown(app, TAB_COMPARE_EPOCHS, COMPARE_EPOCHS_SHOWN)
    follow_status(app, TAB_COMPARE_EPOCHS, COMPARE_EPOCHS_STATUS, COMPARE_EPOCHS_DRAWN,
                  [(RUN_SELECT, "value"), (COMPARE_EPOCHS_SELECT, "value")])

    @app.callback(Output(COMPARE_EPOCHS_SELECT, "options"), Output(COMPARE_EPOCHS_SELECT, "value"),
                  Output(COMPARE_EPOCHS_NOTE, "children"), Input(EPOCH_SELECT, "options"),
                  Input(EPOCH_SELECT, "value"), State(RUN_SELECT, "value"), prevent_initial_call=True)
    def choose_epochs(_: list, epoch_key: Optional[str], run_path: Optional[str]) -> tuple:
        return epochs_to_compare(backend, run_path, epoch_key)

    @app.callback(Output(COMPARE_EPOCHS_PANEL, "children"), Output(COMPARE_EPOCHS_DRAWN, "data"),
                  Output(COMPARE_EPOCHS_STATUS, "children"),
                  Input(COMPARE_EPOCHS_SHOWN, "data"), Input(COMPARE_EPOCHS_SELECT, "value"),
                  State(TABS, "value"), State(RUN_SELECT, "value"), State(COMPARE_EPOCHS_DRAWN, "data"),
                  prevent_initial_call=True)
    def compare_epochs(shown: Optional[dict], keys: Optional[list], tab: str, run_path: Optional[str],
                       drawn: Optional[list]) -> tuple:
        """Drawn while the tab is shown, once per datapoint, run and epochs (what it shows: ``drawn``, and a status
        line saying "loading" until then, see shared/pending.py)."""
        shown = shown if isinstance(shown, dict) else None
        wanted = storable([None if shown is None else shown.get("idx"), run_path, keys])
        if tab != TAB_COMPARE_EPOCHS or shown is None or wanted == drawn:
            return no_update, no_update, no_update
        run = backend.run(run_path)
        epochs = [e for e in backend.epochs(run) if e.key in (keys or [])] if run else []
        try:
            idx = datapoint_idx(shown.get("idx"))
        except BadRequest as exc:
            return message(str(exc), "warning"), wanted, ""
        if idx is None or not epochs:
            return message("Click a datapoint and pick the epochs to compare."), wanted, ""
        return epoch_columns(backend, run, epochs, idx), wanted, ""


FEATURE = Feature(register, SENDS, Tab(TAB_COMPARE_EPOCHS, compare_epochs_tab))
