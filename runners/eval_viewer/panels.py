"""The tabs on the right: the open datapoint, the epoch and run comparisons, the model report, the failures and the
training."""

from __future__ import annotations

from typing import Optional

from dash import dcc, html

from runners.eval_viewer.compare_epochs.callbacks import epochs_to_compare, other_run_epochs, other_run_options
from runners.eval_viewer.compare_runs.callbacks import first_run_diff
from runners.eval_viewer.compare_runs.view import run_diff_section
from runners.eval_viewer.datapoint.view import build_panel, shown_debuggers
from runners.eval_viewer.failures.callbacks import findings_content
from runners.eval_viewer.failures.view import failures_tab
from runners.eval_viewer.gallery.callbacks import first_gallery
from runners.eval_viewer.gallery.view import gallery_tab
from runners.eval_viewer.model_report.callbacks import render_model_report
from runners.eval_viewer.shared import ids
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.components import NOTHING_OPEN
from runners.eval_viewer.shared.first_view import FirstView
from runners.eval_viewer.shared.pending import loading
from runners.eval_viewer.table.view import filter_model
from runners.eval_viewer.training.callbacks import training_content
from runners.eval_viewer.training.view import training_tab


def _tab(label: str, value: str, children: list) -> dcc.Tab:
    return dcc.Tab(label=label, value=value, id=value, children=html.Div(children, className="tab-body"))


def _pending(status: str, drawn: str, idx: Optional[int], data: Optional[list] = None) -> list:
    """A panel's status line (loading ``idx`` where the panel is not ``data``, drawn for it) and the store of what it
    shows (``callbacks/pending.py``); a store of nothing drawn is given no data (a Store given None sets it again
    when it mounts, which would run its callbacks)."""
    return [dcc.Store(id=drawn, **({} if data is None else {"data": data})),
            html.Div("" if data else loading(idx), id=status, className="panel-status", role="status")]


def datapoint_navigation() -> html.Div:
    """Previous / next datapoint in the table's current order (keys k / j)."""
    return html.Div([
        html.Button("◀ previous (k)", id=ids.PREV_BUTTON, className="small-button", title="previous row (k)"),
        html.Button("next (j) ▶", id=ids.NEXT_BUTTON, className="small-button", title="next row (j)"),
        html.Button("Export filtered rows as HTML", id=ids.EXPORT_BUTTON, className="small-button",
                    title="a self-contained HTML report of the table's filtered datapoints, in its order, "
                          "saying which filters and sort chose them"),
        html.Span(id=ids.NAVIGATION_NOTE, className="hint"),
        dcc.Download(id=ids.EXPORT_DOWNLOAD),
    ], className="navigation")


def datapoint_tabs(backend: ViewerBackend, first: FirstView, run_options: list[dict]) -> dcc.Tabs:
    """The tabs as the first page shows them: the open datapoint drawn (with its tick boxes) when the Datapoint
    tab is shown, the comparisons' pickers filled, the model report drawn when it is the tab shown. So the page
    runs no callback for a tab, shown or hidden, before it is usable."""
    panel, debuggers, shown, drawn_for = NOTHING_OPEN, [], None, None
    if first.tab == ids.TAB_DATAPOINT:
        drawn = build_panel(backend, first.run, first.epoch, first.idx)
        panel, debuggers = drawn.body, list(drawn.debuggers)
        shown = shown_debuggers(debuggers, None) if debuggers else None
        drawn_for = None if first.idx is None else [first.idx, first.run, first.epoch]
    epoch_options, compared = epochs_to_compare(backend, first.run, first.epoch, first.compare.get("epochs"))
    other_options = other_run_options(run_options, first.run)
    other = first.compare.get("run") if first.compare.get("run") in {o["value"] for o in other_options} else None
    other_epochs, other_epoch = other_run_epochs(backend, other, first.compare.get("epoch") or first.epoch,
                                                 first.epoch, first.run)
    report = render_model_report(backend, first.run) if first.tab == ids.TAB_MODEL_REPORT else None
    return dcc.Tabs(id=ids.TABS, value=first.tab, children=[
        _tab("Datapoint", ids.TAB_DATAPOINT, [
            dcc.Checklist(id=ids.DEBUGGER_PICK, options=debuggers, value=shown, inline=True, className="debugger-pick"),
            *_pending(ids.DATAPOINT_STATUS, ids.DATAPOINT_DRAWN, first.idx, drawn_for),
            html.Div(panel, id=ids.DATAPOINT_PANEL, className="datapoint-panel")]),
        gallery_tab(*first_gallery(backend, first, filter_model(first.filters))),
        _tab("Compare epochs", ids.TAB_COMPARE_EPOCHS, [
            html.Label("Epochs side by side (those with debug outputs are preselected)"),
            dcc.Dropdown(id=ids.COMPARE_EPOCHS_SELECT, options=epoch_options, value=compared, multi=True),
            dcc.Store(id=ids.COMPARE_EPOCHS_SHOWN),
            *_pending(ids.COMPARE_EPOCHS_STATUS, ids.COMPARE_EPOCHS_DRAWN, first.idx),
            html.Div(NOTHING_OPEN, id=ids.COMPARE_EPOCHS_PANEL, className="compare-panel"),
        ]),
        _tab("Compare runs", ids.TAB_COMPARE_RUNS, [
            html.Div([
                html.Div([html.Label("Second run"), dcc.Dropdown(id=ids.COMPARE_RUN_SELECT, options=other_options,
                                                                 value=other)],
                         className="control", style={"width": "60%"}),
                html.Div([html.Label("Its epoch"), dcc.Dropdown(id=ids.COMPARE_RUN_EPOCH_SELECT, options=other_epochs,
                                                                value=other_epoch)],
                         className="control", style={"width": "30%"}),
            ], className="controls"),
            run_diff_section(first_run_diff(backend, first, other, other_epoch)),
            dcc.Store(id=ids.COMPARE_RUNS_SHOWN),
            *_pending(ids.COMPARE_RUNS_STATUS, ids.COMPARE_RUNS_DRAWN, first.idx),
            html.Div(NOTHING_OPEN, id=ids.COMPARE_RUNS_PANEL, className="compare-panel"),
        ]),
        _tab("Model report", ids.TAB_MODEL_REPORT, [html.Div(report, id=ids.MODEL_REPORT_PANEL)]),
        failures_tab(findings_content(backend, first.run, first.epoch)) if first.tab == ids.TAB_FAILURES
        else failures_tab(),
        training_tab(training_content(backend, first.run, None) if first.tab == ids.TAB_TRAINING else None),
    ])
