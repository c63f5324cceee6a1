"""The Model report tab: figures of the run's ``model_report.json``."""

from __future__ import annotations

from typing import Optional

from dash import Dash, Input, Output, dcc, html, no_update

from data.viewer.layout.display.figures import model_report_figures
from data.viewer.layout.display.values import GRAPH_CONFIG
from run_dir.names import MODEL_REPORT_FILE
from runners.eval_viewer.backend.runs import read_model_report
from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.callbacks.components import message
from runners.eval_viewer.layout import ids


def render_model_report(backend: ViewerBackend, run_path: Optional[str]) -> html.Div:
    run = backend.run(run_path)
    if run is None:
        return html.Div(message("Pick a run."))
    try:
        report = read_model_report(run.path)
    except (OSError, ValueError) as exc:
        return html.Div(message(f"{MODEL_REPORT_FILE} of {run.name} cannot be read ({exc}); rerun to rewrite it",
                                "danger"))
    if report is None:
        return html.Div(message(f"{run.name} has no {MODEL_REPORT_FILE}: this run wrote no model report.",
                                "secondary"))
    figures = model_report_figures(report)
    return html.Div([dcc.Graph(figure=f, config=GRAPH_CONFIG, className="report-figure") for f in figures])


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(ids.MODEL_REPORT_PANEL, "children"), Input(ids.TABS, "value"), Input(ids.RUN_SELECT, "value"),
                  prevent_initial_call=True)  # a first page on this tab comes with it (layout/panels.py)
    def show_model_report(tab: str, run_path: Optional[str]) -> object:
        return render_model_report(backend, run_path) if tab == ids.TAB_MODEL_REPORT else no_update
