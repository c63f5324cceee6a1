"""The Failures tab: why the chosen epoch's datapoints fail (``analysis.failures``), each finding clickable.

Clicking a finding (a slice, a separating quantity's bar, a confusion-matrix cell, a cluster, the label
suspects, a NaN origin, a dead unit) writes its datapoints' idx to the ``TABLE_IDX_FILTER`` store, which the datapoint
table and the score grid read; opening a datapoint from the table then shows it, Debug Outputs included.
"""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from analysis.failures import Findings
from data.viewer.layout.display.elements import alert
from runners.eval_viewer.layout.ids import TAB_FAILURES
from runners.eval_viewer.layout.verify import separator_buttons, verify_button, verify_panel

NO_EPOCH = "Choose a run and an epoch to see why its datapoints fail."
PANEL = "failures-panel"  # the summary and the slices
MORE = "failures-more"  # clusters, label suspects, NaN origins, dead units
FINDING = "failures-finding"  # pattern-matching id type: {'type': FINDING, 'index': '<list>-<position>'}
SEPARATORS_CHART = "failures-separators"
CONFUSION_CHART = "failures-confusion"
SHOW_ALL = "failures-show-all"
FILTER_NOTE = "failures-filter-note"
FINDING_STYLE = {"textAlign": "left", "width": "100%", "cursor": "pointer", "margin": "2px 0",
                 "background": "white", "border": "1px solid #ddd", "borderRadius": "4px", "padding": "4px 8px"}
SEPARATOR_SHARE = 0.1  # clicking a bar shows the failing side's most extreme tenth of that quantity


def failures_tab(content: tuple = (NO_EPOCH, [], {}, {})) -> dcc.Tab:
    """The tab, filled with ``content`` (``callbacks.failures.findings_content``: the findings above the charts,
    those below, the separators' and the confusion charts) when the first page opens on it."""
    above, below, separators, confusion = content
    return dcc.Tab(label="Failures", value=TAB_FAILURES, id=TAB_FAILURES, children=html.Div([
        html.Div([html.Button("Show all datapoints", id=SHOW_ALL, className="small-button"),
                  html.Span(id=FILTER_NOTE, className="hint")], className="navigation"),
        verify_panel(),
        dcc.Loading(html.Div(above, id=PANEL)),
        html.H4("Separating quantities (AUROC, failures vs passes; click a bar)"),
        dcc.Graph(id=SEPARATORS_CHART, figure=separators, config={"displaylogo": False}),
        html.H4("Confusion matrix (rows: label, columns: prediction; click a cell)"),
        dcc.Graph(id=CONFUSION_CHART, figure=confusion, config={"displaylogo": False}),
        html.Div(below, id=MORE),
    ], className="tab-body"))


def findings_view(findings: Findings) -> tuple[list[Any], list[Any]]:
    """The finding lists above and below the charts, best first; each entry a button that filters the
    table to its datapoints. The analysis's notes (what it left out, and why) come first."""
    above = [
        html.P(f"{findings.failures} of {findings.datapoints} datapoints fail ({findings.failure_definition}). "
               "Click a finding to filter the table to its datapoints.", className="hint"),
        *[alert(note, "warning", "failures-note") for note in findings.notes],
        _section("Slices that fail more than the rest", [
            _finding(f"slice-{i}", s.description, f"{s.size} datapoints, {s.failure_rate:.0%} fail "
                                                 f"(rest {s.rest_failure_rate:.0%})")
            for i, s in enumerate(findings.slices)]),
        separator_buttons(findings),
    ]
    below = [
        _section("Failure clusters in captured feature spaces", [
            _finding(f"cluster-{i}", f"{c.debugger} cluster {i + 1}",
                     f"{c.size} datapoints, {c.failure_rate:.0%} fail: {c.description}")
            for i, c in enumerate(findings.clusters)]),
        _section("Suspected label errors (cleanlab)", [
            _finding("labels-0", f"{len(findings.label_issues)} most suspicious labels",
                     ", ".join(f"#{e.idx} {e.label} (model: {e.suggested})" for e in findings.label_issues[:5]))
        ] if findings.label_issues else []),
        _section("Where NaN/Inf first appears", [
            _finding(f"nan-{i}", o.module, f"{o.count} datapoints ({o.module_type})")
            for i, o in enumerate(findings.nan_origins)]),
        _section("Dead units (the same value for every datapoint)", [
            _finding(f"dead-{i}", f"{d.column} = {d.value:g}", "for every datapoint: open one to see the unit")
            for i, d in enumerate(findings.dead_units)]),
    ]
    return above, below


def separators_figure(findings: Findings) -> dict:
    separators = list(reversed(findings.separators))  # the strongest on top
    return {
        "data": [{"type": "bar", "orientation": "h", "x": [s.auroc for s in separators],
                  "y": [s.column for s in separators], "customdata": [s.column for s in separators],
                  "text": [s.direction for s in separators], "hovertemplate": "%{y}: %{x:.3f} (%{text})"}],
        "layout": {"height": 60 + 24 * len(separators), "margin": {"l": 160, "r": 10, "t": 10, "b": 30},
                   "xaxis": {"range": [0.5, 1.0], "title": "AUROC"}},
    }


def confusion_figure(findings: Findings) -> dict:
    """The confusion matrix; its colour scale spans the errors only (off the diagonal), so they stand out."""
    confusion = findings.confusion or {"classes": [], "matrix": []}
    names = [str(name) for name in confusion["classes"]]
    errors = [count for i, row in enumerate(confusion["matrix"]) for j, count in enumerate(row) if i != j]
    return {
        "data": [{"type": "heatmap", "z": confusion["matrix"], "x": names, "y": names, "colorscale": "Blues",
                  "reversescale": True, "zmin": 0, "zmax": max(errors, default=0) or 1, "texttemplate": "%{z}",
                  "colorbar": {"title": {"text": "datapoints (errors' scale)"}},
                  "hovertemplate": "label %{y}, predicted %{x}: %{z}"}],
        "layout": {"height": 120 + 28 * len(names), "margin": {"l": 90, "r": 10, "t": 10, "b": 60},
                   "yaxis": {"autorange": "reversed"}},
    }


def _section(title: str, items: list) -> html.Div:
    return html.Div([html.H4(title), html.Ul(items) if items else html.P("none", className="hint")])


def _finding(key: str, title: str, detail: str) -> html.Li:
    """The finding's button (it narrows the table) and, for a finding an intervention can test, its verify button."""
    return html.Li([html.Button([html.B(title), html.Span(f"  {detail}")], id={"type": FINDING, "index": key},
                                className="finding-button", style=FINDING_STYLE), verify_button(key)],
                   style={"display": "flex", "alignItems": "center"})
