"""The tabs on the right: the open datapoint, the epoch and run comparisons, the model report."""

from __future__ import annotations

from dash import dcc, html

from runners.eval_viewer.layout import ids
from runners.eval_viewer.layout.failures import failures_tab

NOTHING_OPEN = "Click a datapoint in the table or the grid to open it (then j / k for the next and previous)."
_EMPTY = NOTHING_OPEN


def _tab(label: str, value: str, children: list) -> dcc.Tab:
    return dcc.Tab(label=label, value=value, id=value, children=html.Div(children, className="tab-body"))


def datapoint_navigation() -> html.Div:
    """Previous / next datapoint in the table's current order (keys k / j)."""
    return html.Div([
        html.Button("◀ previous (k)", id=ids.PREV_BUTTON, className="small-button", title="previous row (k)"),
        html.Button("next (j) ▶", id=ids.NEXT_BUTTON, className="small-button", title="next row (j)"),
        html.Button("Export filtered rows as HTML", id=ids.EXPORT_BUTTON, className="small-button",
                    title="a self-contained HTML report of the table's filtered datapoints (at most 50)"),
        dcc.Download(id=ids.EXPORT_DOWNLOAD),
    ], className="navigation")


def datapoint_tabs(tab: str = ids.TAB_DATAPOINT) -> dcc.Tabs:
    return dcc.Tabs(id=ids.TABS, value=tab, children=[
        _tab("Datapoint", ids.TAB_DATAPOINT, [
            dcc.Checklist(id=ids.DEBUGGER_PICK, options=[], value=None, inline=True, className="debugger-pick"),
            html.Div(_EMPTY, id=ids.DATAPOINT_PANEL)]),
        _tab("Compare epochs", ids.TAB_COMPARE_EPOCHS, [
            html.Label("Epochs side by side (those with debug outputs are preselected)"),
            dcc.Dropdown(id=ids.COMPARE_EPOCHS_SELECT, multi=True),
            dcc.Store(id=ids.COMPARE_EPOCHS_SHOWN),
            html.Div(_EMPTY, id=ids.COMPARE_EPOCHS_PANEL),
        ]),
        _tab("Compare runs", ids.TAB_COMPARE_RUNS, [
            html.Div([
                html.Div([html.Label("Second run"), dcc.Dropdown(id=ids.COMPARE_RUN_SELECT)], className="control",
                         style={"width": "60%"}),
                html.Div([html.Label("Its epoch"), dcc.Dropdown(id=ids.COMPARE_RUN_EPOCH_SELECT)],
                         className="control", style={"width": "30%"}),
            ], className="controls"),
            dcc.Store(id=ids.COMPARE_RUNS_SHOWN),
            html.Div(_EMPTY, id=ids.COMPARE_RUNS_PANEL),
        ]),
        _tab("Model report", ids.TAB_MODEL_REPORT, [html.Div(id=ids.MODEL_REPORT_PANEL)]),
        failures_tab(),
    ])
