"""The Failures tab: why the chosen epoch's datapoints fail (``analysis.failures``), each finding clickable.

What fails first (a classifier's main confusions: label read as prediction), then meta info (what the data says:
what a user can change; where it names no slice, why not in numbers), the slices within one class, the slices on what
the captured inputs hold (the share of rare tokens: derived columns, not the table's), then what the
model does (each internal finding with
the meta conditions that best match it, or "no meta column describes it"), subgroups of the captured feature spaces
(rare variants among them), the systematic training-label groups, the label suspects told apart from them (with why
some are left out, or all withheld), the data map of the validation epochs (and whether the model was still
learning), the columns that restate the failure (never causes), NaN origins and dead units.

Clicking a finding (a confusion, a slice, a slice within a class, a separating quantity's bar or button, a subgroup,
a training-label group, a suspect group, the label suspects,
a kind of the data map, a confusion-matrix cell, a NaN origin, a dead unit) writes its datapoints' idx to the
``TABLE_IDX_FILTER`` store, which the datapoint table and the score grid read; opening a datapoint from the table
then shows it, Debug Outputs included.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from dash import dcc, html

from analysis.findings import Findings, MetaMatch, NoSlice, Separator, Slice, TrainingLabelGroup
from runners.eval_viewer.failures.data import FINDINGS_ERRORS, chosen_epoch, table_roles
from runners.eval_viewer.failures.ids import (
    FAILURES_CONFUSION_CHART,
    FAILURES_DATA_MAP_CHART,
    FAILURES_FILTER_NOTE,
    FAILURES_FINDING,
    FAILURES_MORE,
    FAILURES_PANEL,
    FAILURES_SEPARATORS_CHART,
    FAILURES_SHOW_ALL,
    TAB_FAILURES,
)
from runners.eval_viewer.failures.verify_view import separator_buttons, verify_button, verify_panel
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.elements import alert
from runners.eval_viewer.shared.first_view import FirstView

NO_EPOCH = "Choose a run and an epoch to see why its datapoints fail."
FINDING_STYLE = {"textAlign": "left", "width": "100%", "cursor": "pointer", "margin": "2px 0",
                 "background": "white", "border": "1px solid #ddd", "borderRadius": "4px", "padding": "4px 8px"}
KIND_COLOURS = {"easy": "#4c9f70", "ambiguous": "#e0a030", "hard to learn": "#c0392b", "still learning": "#3b73b9"}
EMPTY_CONTENT = (NO_EPOCH, [], {}, {}, {})


def failures_tab(backend: ViewerBackend, first: FirstView) -> dcc.Tab:
    """The tab, filled with its findings (``findings_content``) when it is the tab the first page opens on."""
    content = findings_content(backend, first.run, first.epoch) if first.tab == TAB_FAILURES else EMPTY_CONTENT
    above, below, separators, data_map, confusion = content
    return dcc.Tab(label="Failures", value=TAB_FAILURES, id=TAB_FAILURES, children=html.Div([
        html.Div([html.Button("Show all datapoints", id=FAILURES_SHOW_ALL, className="small-button"),
                  html.Span(id=FAILURES_FILTER_NOTE, className="hint")], className="navigation"),
        verify_panel(),
        dcc.Loading(html.Div(above, id=FAILURES_PANEL)),
        html.H5("Meta info: separating quantities (AUROC, failures vs passes; click a bar)"),
        dcc.Graph(id=FAILURES_SEPARATORS_CHART, figure=separators, config={"displaylogo": False}),
        html.Div(below, id=FAILURES_MORE),
        html.H5("Data map of the validation epochs (confidence in the label against its variability)"),
        dcc.Graph(id=FAILURES_DATA_MAP_CHART, figure=data_map, config={"displaylogo": False}),
        html.H5("Confusion matrix (rows: label, columns: prediction; click a cell)"),
        dcc.Graph(id=FAILURES_CONFUSION_CHART, figure=confusion, config={"displaylogo": False}),
    ], className="tab-body"))


def findings_view(findings: Findings, roles: Mapping[str, Any]) -> tuple[list[Any], list[Any]]:
    """The finding lists above and below the meta chart, best first; each entry a button that filters the table to
    its datapoints, and a verify button where a check can test it (by the epoch table's ``roles``). The analysis's
    notes (what it left out, and why) come first."""
    above = [
        html.P(f"{findings.failures} of {findings.datapoints} datapoints fail ({findings.failure_definition}). "
               "Click a finding to filter the table to its datapoints.", className="hint"),
        *[alert(note, "warning", "failures-note") for note in findings.notes],
        *_confusions(findings),
        _section("Meta info: slices that fail more than the rest (what the data says)", [
            _finding(f"slice-{i}", s.description, _slice_detail(s), roles)
            for i, s in enumerate(findings.meta.slices)],
            findings.meta.no_slice),
        *_class_slices(findings, roles),
        *_input_slices(findings, roles),
        separator_buttons(findings, roles),
    ]
    below = [
        _section("What the model does: slices on the debuggers' summaries", [
            _finding(f"islice-{i}", s.description, _slice_detail(s), roles)
            for i, s in enumerate(findings.internals.slices)],
            findings.internals.no_slice),
        _section("What the model does: separating quantities (a family of units counts once)", [
            _finding(f"iseparator-{i}", s.column, f"AUROC {s.auroc:.3f}, {s.direction}"
                     + (f"; best units {', '.join(f'{u.column} {u.auroc:.3f}' for u in s.units)}" if s.units else "")
                     + "".join(f"; {part}" for part in _separator_notes(s)) + f"; {_match(s.meta_match)}", roles)
            for i, s in enumerate(findings.internals.separators)]),
        _section("Subgroups in captured feature spaces (a rare variant: failures that sit together and fail alike, "
                 "predicted as several classes; one of several labels is found among the failures no other finding "
                 "explains)", [
            _finding(f"subgroup-{i}", f"{g.debugger}{'' if g.kind != 'variant' else ': ' + g.kind_name}: {g.size} "
                                      f"datapoints, {g.failure_rate:.0%} fail (rest {g.rest_failure_rate:.0%})",
                     f"{_match(g.meta_match)}; typical: {', '.join(f'#{i}' for i in g.examples)}"
                     + (f"; {g.class_note}" if g.class_note else ""), roles)
            for i, g in enumerate(findings.subgroups)]),
        _section("Systematic training-label groups: one label predicted consistently as another class, the validation "
                 "labels agreeing with their neighbours' (check the TRAINING labels of datapoints like these)", [
            _finding(f"trainlabels-{i}", f"{g.label} → {g.predicted}: {g.size} datapoints, {g.failure_rate:.0%} fail "
                                         f"(rest {g.rest_failure_rate:.0%})", _training_label_detail(g), roles)
            for i, g in enumerate(findings.training_label_groups)]),
        _section("Systematic subgroups among the suspected label errors (fix the data or the model, not the labels)", [
            _finding(f"suspects-{i}", g.description, f"{g.why}; {_match(g.meta_match)}", roles)
            for i, g in enumerate(findings.suspect_groups)]),
        _section("Suspected label errors (cleanlab; groups left out; the most confident disagreement its neighbours "
                 "back first)", ([
                     _finding("labels-0", f"{len(findings.label_issues)} most suspicious labels",
                              ", ".join(f"#{e.idx} {e.label} (model: {e.suggested})"
                                        for e in findings.label_issues[:5]))] if findings.label_issues else [])
                 + ([html.Li(findings.label_issues_note, className="hint suspects-note")]
                    if findings.label_issues_note else [])),
        _data_map_kinds(findings),
        _section("Restate the failure (computed from the model's output: never a cause)", [
            html.Li(f"{r.column}: {r.why}", className="hint") for r in findings.restatements]),
        _section("Where NaN/Inf first appears", [
            _finding(f"nan-{i}", o.module, f"{o.count} datapoints ({o.module_type})", roles)
            for i, o in enumerate(findings.nan_origins)]),
        _section("Dead units (the same value for every datapoint)", [
            _finding(f"dead-{i}", f"{d.column} = {d.value:g}", "for every datapoint: open one to see the unit")
            for i, d in enumerate(findings.dead_units)]),
    ]
    return above, below


def _input_slices(findings: Findings, roles: Mapping[str, Any]) -> list[html.Div]:
    """Slices on the columns derived from the captured inputs (``analysis/rare_tokens.py``: not columns of the
    table); nothing for a run without such columns."""
    family = findings.inputs
    if not family.had_columns():
        return []
    return [_section("Inputs: slices on what the captured inputs hold (derived from them, not table columns)", [
        _finding(f"inslice-{i}", s.description, _slice_detail(s), roles) for i, s in enumerate(family.slices)],
        family.no_slice)]


def _slice_detail(found: Slice) -> str:
    parts = [f"{found.size} datapoints, {found.failure_rate:.0%} fail (rest {found.rest_failure_rate:.0%})"]
    parts += [f"also: {'; '.join(found.also)}"] if found.also else []
    if found.family == "internals":
        parts.append(_match(found.meta_match) if found.meta_match else
                     f"{_match(None)}; examples: {', '.join(f'#{i}' for i in found.examples)}")
    parts += [f"inside the model: {'; '.join(found.inside_model)}"] if found.inside_model else []
    parts += [f"NaN first appears in {found.nan_origin}"] if found.nan_origin else []
    parts += [found.class_note] if found.class_note else []
    return "; ".join(parts)


def _training_label_detail(group: TrainingLabelGroup) -> str:
    """What ties the group together, what describes it, and what to do."""
    return (f"{group.consistency:.0%} of its failures predicted as {group.predicted} (p {group.confidence:.2f}); "
            f"{group.neighbours_agree:.0%} of their neighbours share their label; {_match(group.meta_match)}; "
            f"typical: {', '.join(f'#{i}' for i in group.examples)}. The model learnt '{group.predicted}' for "
            f"datapoints like these, most often from training labels that say so; if those say '{group.label}', what "
            f"they share makes the model see '{group.predicted}'")
def _confusions(findings: Findings) -> list[html.Div]:
    """A classifier's main confusions, first: what the model mistakes for what, each a button to its datapoints."""
    if findings.confusion is None:
        return []
    listed = sum(c.count for c in findings.confusions)
    return [_section(f"Main confusions: label read as prediction ({listed} of the {findings.failures} failures)", [
        _finding(f"confusion-{i}", c.description, f"{c.count} datapoints, {c.share:.0%} of the label; most confident: "
                                                  f"{', '.join(f'#{i}' for i in c.examples)}")
        for i, c in enumerate(findings.confusions)], empty="no label is read as one prediction more than once")]


def _class_slices(findings: Findings, roles: Mapping[str, Any]) -> list[html.Div]:
    """Conditions that make one class fail more than the rest of it (a classifier's only), or why none; each
    verifiable as a slice."""
    if findings.confusion is None:
        return []
    return [_section("Within a class: conditions that make one class fail more than the rest of it", [
        _finding(f"classslice-{i}", c.description, f"{c.size} datapoints, {c.failure_rate:.0%} fail (the rest of the "
                                                   f"class {c.rest_failure_rate:.0%}); the class: "
                                                   f"{c.class_failure_rate:.0%} of {c.class_size} fail", roles)
        for i, c in enumerate(findings.class_slices)], findings.class_no_slice)]


def _separator_notes(separator: Separator) -> list[str]:
    """A separating quantity's near-duplicates and, where it restates which classes fail, the note that says so."""
    return [part for part in (separator.twins_description, separator.class_note) if part]


def _match(match: MetaMatch | None) -> str:
    return match.describe() if match is not None else "no meta column describes it"


def _data_map_kinds(findings: Findings) -> html.Div:
    """Buttons for the data map's ambiguous and hard-to-learn datapoints (counts of every kind)."""
    data_map = findings.data_map
    if data_map is None:
        return _section("Data map", [html.Li("needs labels, probabilities and at least 3 validation epochs of a "
                                             "trainer's run", className="hint")])
    counts, failing = data_map.counts, data_map.failures
    summary = ", ".join(f"{kind} {counts[kind]} ({failing[kind]} fail)" for kind in counts)
    return _section(f"Data map over validation epochs {', '.join(map(str, data_map.epochs))}: {summary}", [
        *([html.Li(data_map.note, className="hint data-map-note")] if data_map.note else []),
        _finding("map-ambiguous", f"{len(data_map.ambiguous)} ambiguous datapoints",
                 "the model changes its mind about them from epoch to epoch"),
        _finding("map-hard", f"{len(data_map.hard)} hard-to-learn datapoints",
                 "the model consistently gives their label a low probability: mislabelled, or a group it never "
                 "learns (see the groups and suspects above)"),
        _finding("map-learning", f"{len(data_map.still_learning)} still-learning datapoints",
                 "their label's probability was still rising at the last epoch: the model had not learnt them yet")])


def separators_figure(findings: Findings) -> dict:
    separators = list(reversed(findings.meta.separators))  # the strongest on top
    return {
        "data": [{"type": "bar", "orientation": "h", "x": [s.auroc for s in separators],
                  "y": [s.column for s in separators], "customdata": [s.column for s in separators],
                  "text": ["; ".join([s.direction, *_separator_notes(s)]) for s in separators],
                  "hovertemplate": "%{y}: %{x:.3f} (%{text})"}],
        "layout": {"height": 60 + 24 * len(separators), "margin": {"l": 160, "r": 10, "t": 10, "b": 30},
                   "xaxis": {"range": [0.5, 1.0], "title": "AUROC"}},
    }


def data_map_figure(findings: Findings) -> dict:
    """Variability (x) against confidence (y) of a sample of datapoints, by kind; failures drawn as crosses."""
    data_map = findings.data_map
    if data_map is None:
        return {"data": [], "layout": {"height": 60, "margin": {"t": 10, "b": 10},
                                       "annotations": [{"text": "no data map", "showarrow": False}]}}
    points = data_map.points
    traces = []
    for kind, colour in KIND_COLOURS.items():
        for failed in (False, True):
            chosen = [i for i, (k, f) in enumerate(zip(points["kind"], points["failed"])) if k == kind and f == failed]
            traces.append({"type": "scatter", "mode": "markers", "name": f"{kind}{', fails' if failed else ''}",
                           "x": [points["variability"][i] for i in chosen],
                           "y": [points["confidence"][i] for i in chosen],
                           "customdata": [points["idx"][i] for i in chosen],
                           "marker": {"color": colour, "size": 7 if failed else 5, "opacity": 0.7,
                                      "symbol": "x" if failed else "circle"},
                           "hovertemplate": "#%{customdata}: confidence %{y:.2f}, variability %{x:.2f}"})
    return {"data": traces, "layout": {"height": 360, "margin": {"l": 60, "r": 10, "t": 10, "b": 40},
                                       "xaxis": {"title": "variability (std of p(label) over epochs)"},
                                       "yaxis": {"title": "confidence (mean p(label))", "range": [0, 1]}}}


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


def _section(title: str, items: list, why_none: Optional[NoSlice] = None, empty: str = "none") -> html.Div:
    """A titled list of findings; where it is empty, ``empty``, and why none is named (``NoSlice``) in numbers."""
    if items:
        return html.Div([html.H5(title), html.Ul(items)])
    why = [html.P(f"Why none: {why_none.description}", className="hint why-none")] if why_none else []
    return html.Div([html.H5(title), html.P(empty, className="hint"), *why])


def _finding(key: str, title: str, detail: str, roles: Optional[Mapping[str, Any]] = None) -> html.Li:
    """The finding's button (it narrows the table) and, given the epoch table's ``roles``, its verify button where a
    check can test it."""
    return html.Li([html.Button([html.B(title), html.Span(f"  {detail}")], id={"type": FAILURES_FINDING, "index": key},
                                className="finding-button", style=FINDING_STYLE),
                    verify_button(key, roles) if roles is not None else None],
                   style={"display": "flex", "alignItems": "center"})


def findings_content(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str]) -> tuple:
    """What the tab shows for a run and epoch: the findings above the meta chart, those below, and the three
    charts (meta separating quantities, data map, confusion matrix). A table the analysis cannot read gives its
    message in place of the findings."""
    epoch = chosen_epoch(backend, run_path, epoch_key)
    if epoch is None:
        return EMPTY_CONTENT
    try:
        findings = backend.findings(epoch)
    except FINDINGS_ERRORS as exc:
        return alert(str(exc), "danger", "failures-error"), [], {}, {}, {}
    above, below = findings_view(findings, table_roles(backend, epoch))
    return (above, below, separators_figure(findings), data_map_figure(findings),
            confusion_figure(findings))
