"""What the Failures tab reads and narrows to: the datapoints a clicked finding stands for (a slice, a separating
quantity's failing tenth, a confusion-matrix cell, a dead unit ...), as the ``TABLE_IDX_FILTER`` narrowing of the
run and epoch they were found in, which an address can name (``finding_key``)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from analysis.epoch_table import EpochTable, EpochTableError
from analysis.failures import AnalysisError, Findings
from analysis.findings import DeadUnit, TrainingLabelGroup
from runners.eval_viewer.failures.ids import (
    FAILURES_CONFUSION_CHART,
    FAILURES_FINDING,
    FAILURES_SEPARATORS_CHART,
)
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.runs import Epoch
from runners.eval_viewer.shared.scores import ScoresError
from runners.eval_viewer.shared.table import TABLE_ERRORS

SEPARATOR_SHARE = 0.1  # clicking a separating quantity shows the failing side's most extreme tenth of it
MAP_KINDS = {"ambiguous": "ambiguous", "hard": "hard", "learning": "still_learning"}  # a data-map button's datapoints
FINDINGS_ERRORS = (AnalysisError, EpochTableError, ScoresError)


def table_roles(backend: ViewerBackend, epoch: Epoch) -> dict[str, Any]:
    """The epoch table's column roles (which columns Grad-CAM summarised, ...); none where it cannot be read."""
    try:
        return dict(backend.table(epoch).roles)
    except TABLE_ERRORS:
        return {}


def narrowing(run_path: Optional[str], epoch_key: Optional[str], idx: list[int], finding: str = "",
              what: str = "") -> dict:
    """What ``TABLE_IDX_FILTER`` holds for a clicked finding: its idx and the run and epoch they are of, and which
    finding it is (``finding_key``, so an address can name it) and what."""
    return {"run": run_path, "epoch": epoch_key, "idx": idx, "finding": finding, "what": what}


def finding_key(trigger: Any, separator: Optional[dict], cell: Optional[dict]) -> str:
    """A clicked finding as the address names it: 'slice-0', 'separator:<column>', 'confusion:<label>|<prediction>'."""
    if trigger == FAILURES_SEPARATORS_CHART:
        return f"separator:{((separator or {}).get('points') or [{}])[0].get('customdata')}"
    if trigger == FAILURES_CONFUSION_CHART:
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
        "separator": (FAILURES_SEPARATORS_CHART, {"points": [{"customdata": rest}]}, None),
        "confusion": (FAILURES_CONFUSION_CHART, None, {"points": [{"y": label, "x": prediction}]}),
    }.get(kind, ({"type": FAILURES_FINDING, "index": key}, None, None))
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


def chosen_datapoints(findings: Findings, trigger: Any, separator: Optional[dict],
                      cell: Optional[dict]) -> Optional[tuple[list[int], str]]:
    """The idx a click on a finding stands for, and what it is."""
    if trigger == FAILURES_SEPARATORS_CHART:
        column = ((separator or {}).get("points") or [{}])[0].get("customdata")
        found = next((s for s in findings.meta.separators if s.column == column), None)
        return None if found is None else separator_side(findings, found.column, found.direction)
    if trigger == FAILURES_CONFUSION_CHART:
        point = ((cell or {}).get("points") or [{}])[0]
        return confusion_cell(findings, point.get("y"), point.get("x"))
    kind, _, position = str((trigger or {}).get("index", "")).partition("-")
    if kind == "labels":
        return [issue.idx for issue in findings.label_issues], "suspected label errors"
    if kind == "map" and findings.data_map is not None and position in MAP_KINDS:
        chosen = getattr(findings.data_map, MAP_KINDS[position])
        return chosen.tolist(), f"{MAP_KINDS[position].replace('_', ' ')} datapoints of the data map"
    lists = finding_lists(findings)
    if kind not in lists or not position.isdigit() or int(position) >= len(lists[kind]):
        return None
    found = lists[kind][int(position)]
    if kind == "dead":
        return dead_unit(findings, found)
    if kind == "iseparator":
        return separator_side(findings, found.units[0].column if found.units else found.column, found.direction)
    return found.idx.tolist(), _what(found)


def finding_lists(findings: Findings) -> dict[str, list]:
    """The findings a key names by kind and place (``slice-0``), as ``chosen_datapoints`` reads them."""
    return {"slice": findings.meta.slices, "inslice": findings.inputs.slices, "islice": findings.internals.slices,
            "subgroup": findings.subgroups,
            "suspects": findings.suspect_groups, "nan": findings.nan_origins, "dead": findings.dead_units,
            "iseparator": findings.internals.separators, "trainlabels": findings.training_label_groups,
            "confusion": findings.confusions, "classslice": findings.class_slices}


def finding_names(findings: Findings) -> list[tuple[str, str]]:
    """``(key, what it is)`` of every finding that stands for a set of datapoints, as ``chosen_datapoints`` reads
    the key; a separating quantity's key names its failing tenth."""
    named = [(f"{kind}-{place}", f"{kind}: {_what(found)}") for kind, found_list in finding_lists(findings).items()
             for place, found in enumerate(found_list)]
    named += [(f"separator:{found.column}", f"separator: {found.column}") for found in findings.meta.separators]
    named += [("labels-0", "suspected label errors")] if findings.label_issues else []
    if findings.data_map is not None:
        named += [(f"map-{kind}", f"data map: {what.replace('_', ' ')}") for kind, what in MAP_KINDS.items()]
    return named


def _what(found: Any) -> str:
    if isinstance(found, TrainingLabelGroup):
        return f"label {found.label}, predicted consistently as {found.predicted}"
    return str(getattr(found, "description", None) or getattr(found, "module", None) or getattr(found, "column", ""))


def separator_side(findings: Findings, column: str, direction: str) -> tuple[list[int], str]:
    """The tenth of datapoints with the most failure-like values of ``column``."""
    values = EpochTable(findings.table_path).values(["idx", column])
    numbers = values[column].astype(np.float64)
    usable = np.isfinite(numbers)
    higher = direction.startswith("higher")
    cut = np.quantile(numbers[usable], 1 - SEPARATOR_SHARE if higher else SEPARATOR_SHARE)
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
