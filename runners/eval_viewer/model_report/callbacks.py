"""The Model report tab's callback: the report drawn when the tab is shown, and again for another run."""

from __future__ import annotations

from typing import Optional

from dash import Dash, Input, Output, no_update

from runners.eval_viewer.controls.ids import RUN_SELECT
from runners.eval_viewer.model_report.ids import MODEL_REPORT_PANEL, SENDS, TAB_MODEL_REPORT
from runners.eval_viewer.model_report.view import model_report_tab, render_model_report
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.feature import Feature, Tab
from runners.eval_viewer.shared.ids import TABS


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(MODEL_REPORT_PANEL, "children"), Input(TABS, "value"), Input(RUN_SELECT, "value"),
                  prevent_initial_call=True)  # a first page on this tab comes with it (view.model_report_tab)
    def show_model_report(tab: str, run_path: Optional[str]) -> object:
        return render_model_report(backend, run_path) if tab == TAB_MODEL_REPORT else no_update


FEATURE = Feature(register, SENDS, Tab(TAB_MODEL_REPORT, model_report_tab))
