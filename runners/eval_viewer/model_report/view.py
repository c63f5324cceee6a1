"""The Model report tab: figures of the run's ``model_report.json``, drawn when the tab is shown."""

from __future__ import annotations

from typing import Optional

from dash import dcc, html

from run_dir.names import MODEL_REPORT_FILE
from runners.eval_viewer.figures.values import GRAPH_CONFIG
from runners.eval_viewer.model_report.figures import model_report_figures
from runners.eval_viewer.model_report.ids import MODEL_REPORT_PANEL, TAB_MODEL_REPORT
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.components import message, tab_of
from runners.eval_viewer.shared.first_view import FirstView
from runners.eval_viewer.shared.runs import read_model_report


def render_model_report(backend: ViewerBackend, run_path: Optional[str]) -> html.Div:
    """The run's model report as figures, or why there is none."""
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


def model_report_tab(backend: ViewerBackend, first: FirstView) -> dcc.Tab:
    """The tab, drawn when it is the tab the first page opens on."""
    report = render_model_report(backend, first.run) if first.tab == TAB_MODEL_REPORT else None
    return tab_of("Model report", TAB_MODEL_REPORT, [html.Div(report, id=MODEL_REPORT_PANEL)])
