"""The Failures tab: findings of the chosen epoch, and clicks on them narrowing the datapoint table.

The findings of an epoch are those the trainer stored after validating it (``backend/findings.py``), else computed
when the tab is first shown for it; the backend keeps them (``ViewerBackend.findings``); a first page on this tab
comes with them (``layout/panels.py``).
A click writes its datapoints' idx, with the run and epoch they were found in, to ``ids.TABLE_IDX_FILTER``
(``narrowing``; None for all). The table narrows only the epoch the narrowing names (``narrowed_idx``): an
answer that comes back after the user switched narrows nothing and is dropped. The narrowing ends when the run
or epoch really changes (not when a refresh re-sends the same epoch), and with **Clear filters**.
"""

from __future__ import annotations

import json
from typing import Any, Optional

import numpy as np
from dash import ALL, Dash, Input, Output, State, ctx, no_update

from analysis.epoch_table import EpochTable, EpochTableError
from analysis.failures import AnalysisError, Findings
from analysis.findings import DeadUnit
from runners.eval_viewer.failures import view as layout
from runners.eval_viewer.shared import ids
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.elements import alert
from runners.eval_viewer.shared.runs import Epoch
from runners.eval_viewer.shared.scores import ScoresError

FINDINGS_ERRORS = (AnalysisError, EpochTableError, ScoresError)
READING = "Reading the epoch's findings…"  # the panel, from a switch of run or epoch to the server's answer
_END_NARROWING = """function(run, epoch, _clear, narrowed) {
    const none = window.dash_clientside.no_update;
    const trigger = (window.dash_clientside.callback_context.triggered[0] || {}).prop_id || '';
    const ends = narrowed && (trigger.startsWith('CLEAR.') || narrowed.run !== run || narrowed.epoch !== epoch);
    return ends ? [null, ''] : [none, none];
}""".replace("CLEAR", ids.TABLE_CLEAR_FILTERS)


def narrowing(run_path: Optional[str], epoch_key: Optional[str], idx: list[int], finding: str = "",
              what: str = "") -> dict:
    """What ``TABLE_IDX_FILTER`` holds for a clicked finding: its idx and the run and epoch they are of, and which
    finding it is (``finding_key``, so an address can name it) and what."""
    return {"run": run_path, "epoch": epoch_key, "idx": idx, "finding": finding, "what": what}


def finding_key(trigger: Any, separator: Optional[dict], cell: Optional[dict]) -> str:
    """A clicked finding as the address names it: 'slice-0', 'separator:<column>', 'confusion:<label>|<prediction>'."""
    if trigger == layout.SEPARATORS_CHART:
        return f"separator:{((separator or {}).get('points') or [{}])[0].get('customdata')}"
    if trigger == layout.CONFUSION_CHART:
        point = ((cell or {}).get("points") or [{}])[0]
        return f"confusion:{point.get('y')}|{point.get('x')}"
    return str((trigger or {}).get("index", ""))


def narrowing_of(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str],
                 key: str) -> Optional[dict]:
    """The narrowing the address names by ``finding_key`` (a link to "wrong rings"), None when the epoch has no
    such finding; the analysis's error when it cannot be made."""
    epoch = chosen_epoch(backend, run_path, epoch_key)
    if epoch is None or not key:
        return None
    kind, _, rest = key.partition(":")
    label, _, prediction = rest.partition("|")
    trigger, separator, cell = {
        "separator": (layout.SEPARATORS_CHART, {"points": [{"customdata": rest}]}, None),
        "confusion": (layout.CONFUSION_CHART, None, {"points": [{"y": label, "x": prediction}]}),
    }.get(kind, ({"type": layout.FINDING, "index": key}, None, None))
    chosen = chosen_datapoints(backend.findings(epoch), trigger, separator, cell)
    return None if chosen is None else narrowing(run_path, epoch_key, chosen[0], key, chosen[1])


def narrowed_idx(narrowed: Optional[dict], run_path: Optional[str], epoch_key: Optional[str]) -> Optional[list]:
    """The idx the table of ``run_path``'s ``epoch_key`` is narrowed to, None for all: a narrowing of another run or
    epoch (a finding's answer that came back after a switch) narrows nothing."""
    if not narrowed or (narrowed.get("run"), narrowed.get("epoch")) != (run_path, epoch_key):
        return None
    return narrowed.get("idx")


def chosen_epoch(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str]) -> Optional[Epoch]:
    run = backend.run(run_path)
    return backend.epoch(run, epoch_key) if run else None


def findings_content(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str]) -> tuple:
    """What the tab shows for a run and epoch: the findings above the meta chart, those below, and the three
    charts (meta separating quantities, data map, confusion matrix). A table the analysis cannot read gives its
    message in place of the findings."""
    epoch = chosen_epoch(backend, run_path, epoch_key)
    if epoch is None:
        return layout.EMPTY_CONTENT
    try:
        findings = backend.findings(epoch)
    except FINDINGS_ERRORS as exc:
        return alert(str(exc), "danger", "failures-error"), [], {}, {}, {}
    above, below = layout.findings_view(findings)
    return (above, below, layout.separators_figure(findings), layout.data_map_figure(findings),
            layout.confusion_figure(findings))


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(layout.PANEL, "children"), Output(layout.MORE, "children"),
                  Output(layout.SEPARATORS_CHART, "figure"), Output(layout.DATA_MAP_CHART, "figure"),
                  Output(layout.CONFUSION_CHART, "figure"),
                  Input(ids.RUN_SELECT, "value"), Input(ids.EPOCH_SELECT, "value"), Input(ids.TABS, "value"),
                  prevent_initial_call=True)  # a first page on this tab comes with its findings (layout/panels.py)
    def show_findings(run_path: Optional[str], epoch_key: Optional[str], tab: Optional[str]) -> tuple:
        if tab != layout.TAB_FAILURES:
            return (no_update,) * 5
        return findings_content(backend, run_path, epoch_key)

    @app.callback(Output(ids.TABLE_IDX_FILTER, "data"), Output(layout.FILTER_NOTE, "children"),
                  Input({"type": layout.FINDING, "index": ALL}, "n_clicks"),
                  Input(layout.SEPARATORS_CHART, "clickData"), Input(layout.CONFUSION_CHART, "clickData"),
                  Input(layout.SHOW_ALL, "n_clicks"), State(ids.RUN_SELECT, "value"), State(ids.EPOCH_SELECT, "value"),
                  prevent_initial_call=True)
    def filter_table(_: list, separator: Optional[dict], cell: Optional[dict], __: Optional[int],
                     run_path: Optional[str], epoch_key: Optional[str]) -> tuple:
        trigger = ctx.triggered_id
        epoch = chosen_epoch(backend, run_path, epoch_key)
        if trigger == layout.SHOW_ALL or epoch is None:
            return None, ""
        if not ctx.triggered or not ctx.triggered[0].get("value"):
            return no_update, no_update  # a finding button was drawn, not clicked
        try:
            chosen = chosen_datapoints(backend.findings(epoch), trigger, separator, cell)
        except FINDINGS_ERRORS as exc:
            return no_update, str(exc)
        if chosen is None:
            return no_update, no_update
        idx, what = chosen
        return (narrowing(run_path, epoch_key, idx, finding_key(trigger, separator, cell), what),
                f"Table filtered to {len(idx)} datapoints: {what}")

    app.clientside_callback(  # a narrowing is of the run and epoch it was found in: it ends when either differs
        # (a refresh tick re-sending the same epoch is no switch; a late answer for the run just left is dropped as
        # it lands), and with Clear filters; in the browser, so no refresh tick can drop it
        _END_NARROWING, Output(ids.TABLE_IDX_FILTER, "data", allow_duplicate=True),
        Output(layout.FILTER_NOTE, "children", allow_duplicate=True), Input(ids.RUN_SELECT, "value"),
        Input(ids.EPOCH_SELECT, "value"), Input(ids.TABLE_CLEAR_FILTERS, "n_clicks"),
        Input(ids.TABLE_IDX_FILTER, "data"), prevent_initial_call=True)

    app.clientside_callback(  # the tab shown for another run or epoch says so at once: until the server's answer
        # lands it would go on showing the findings of the epoch left, live buttons included
        f"""function(run, epoch, tab) {{
            if (tab !== '{layout.TAB_FAILURES}') {{ return window.dash_clientside.no_update; }}
            const key = JSON.stringify([run, epoch]);
            if (window.lanternFailuresKey === key) {{ return window.dash_clientside.no_update; }}
            window.lanternFailuresKey = key;
            return {json.dumps(READING)};
        }}""", Output(layout.PANEL, "children", allow_duplicate=True), Input(ids.RUN_SELECT, "value"),
        Input(ids.EPOCH_SELECT, "value"), Input(ids.TABS, "value"), prevent_initial_call=True)

    app.clientside_callback(  # a datapoint opened while the Failures tab shows: show it (in the browser: the
        # Datapoint tab's callback waits for this one, so a server round trip here would delay every click)
        f"""function(idx, tab) {{
            return tab === '{layout.TAB_FAILURES}' && idx !== null && idx !== undefined
                ? '{ids.TAB_DATAPOINT}' : window.dash_clientside.no_update;
        }}""", Output(ids.TABS, "value", allow_duplicate=True), Input(ids.SELECTED, "data"),
        State(ids.TABS, "value"), prevent_initial_call=True)


def chosen_datapoints(findings: Findings, trigger: Any, separator: Optional[dict],
                      cell: Optional[dict]) -> Optional[tuple[list[int], str]]:
    """The idx a click on a finding stands for, and what it is."""
    if trigger == layout.SEPARATORS_CHART:
        column = ((separator or {}).get("points") or [{}])[0].get("customdata")
        found = next((s for s in findings.meta.separators if s.column == column), None)
        return None if found is None else separator_side(findings, found.column, found.direction)
    if trigger == layout.CONFUSION_CHART:
        point = ((cell or {}).get("points") or [{}])[0]
        return confusion_cell(findings, point.get("y"), point.get("x"))
    kind, _, position = str((trigger or {}).get("index", "")).partition("-")
    if kind == "labels":
        return [issue.idx for issue in findings.label_issues], "suspected label errors"
    if kind == "map" and findings.data_map is not None and position in ("ambiguous", "hard"):
        chosen = findings.data_map.ambiguous if position == "ambiguous" else findings.data_map.hard
        return chosen.tolist(), f"{position} datapoints of the data map"
    lists = {"slice": findings.meta.slices, "islice": findings.internals.slices, "subgroup": findings.subgroups,
             "suspects": findings.suspect_groups, "nan": findings.nan_origins, "dead": findings.dead_units,
             "iseparator": findings.internals.separators}
    if kind not in lists or not position.isdigit() or int(position) >= len(lists[kind]):
        return None
    found = lists[kind][int(position)]
    if kind == "dead":
        return dead_unit(findings, found)
    if kind == "iseparator":
        return separator_side(findings, found.units[0].column if found.units else found.column, found.direction)
    what = getattr(found, "description", None) or getattr(found, "module", "")
    return found.idx.tolist(), str(what)


def separator_side(findings: Findings, column: str, direction: str) -> tuple[list[int], str]:
    """The tenth of datapoints with the most failure-like values of ``column``."""
    values = EpochTable(findings.table_path).values(["idx", column])
    numbers = values[column].astype(np.float64)
    usable = np.isfinite(numbers)
    higher = direction.startswith("higher")
    cut = np.quantile(numbers[usable], 1 - layout.SEPARATOR_SHARE if higher else layout.SEPARATOR_SHARE)
    side = usable & ((numbers >= cut) if higher else (numbers <= cut))
    return values["idx"][side].tolist(), f"{column} {'>=' if higher else '<='} {cut:.3g}"


def dead_unit(findings: Findings, unit: DeadUnit) -> tuple[list[int], str]:
    """The datapoints where the unit shows its one value (all but those with no value there)."""
    values = EpochTable(findings.table_path).values(["idx"], where=[(unit.column, "=", unit.value)])
    return values["idx"].tolist(), f"{unit.column} = {unit.value:g}"


def confusion_cell(findings: Findings, label: Any, prediction: Any) -> Optional[tuple[list[int], str]]:
    confusion = findings.confusion
    if confusion is None or label is None or prediction is None:
        return None
    names = [str(name) for name in confusion["classes"]]
    if str(label) not in names or str(prediction) not in names:
        return None
    label_id = confusion["class_ids"][names.index(str(label))]
    prediction_id = confusion["class_ids"][names.index(str(prediction))]
    where = [("label", "=", label_id), ("prediction", "=", prediction_id)]
    values = EpochTable(findings.table_path).values(["idx"], where=where)
    return values["idx"].tolist(), f"label {label}, predicted {prediction}"
