"""From a finding, as ``Findings.to_dict()`` writes it, to an intervention plan: the one place that reads findings.

``finding_entries(findings)`` names each finding ``<list>-<position>`` (``meta.slices-0``, ``nan_origins-0``);
``plan_for_finding(key, finding, facts)`` turns one into an ``InterventionPlan`` or says why it cannot be tested
(``NotVerifiable``). The fields it reads, each optional:

- ``idx``: the finding's datapoints (a list, or ``analysis.findings``' bitmap of a large group). Without it, a
  finding with a ``column`` (a family's: its best unit) and a ``direction`` (a separating quantity) stands for
  the datapoints whose value is more failure-like than that of 90% of the passing ones (``failure_side``): all
  of a group the quantity marks, so that none of it is left to the control.
- ``description``, else ``module``, ``column`` or ``debugger``: the finding's name in the report.
- ``region``: ``{"input": key, "box": [top, left, bottom, right]}`` (pixels, end excluded): that input region
  is masked.
- ``module``: a module where NaN/Inf first appears: its NaN/Inf values are patched.
- the columns it names: ``conditions[*].column`` and ``conditions[*].same_on`` (a slice), ``column``, ``columns``,
  ``units`` (a family of unit columns, by name or as ``{'column', 'auroc'}``). A debugger summary column
  ``<debugger>.<key>`` of a debugger that hooks one layer names a unit of that layer when its key is ``c5``,
  ``ch5``, ``channel5`` or ``unit5`` (``layer3_energy.c5``: unit 5 along the layer's unit dim,
  ``runners.verify.channel_dim``). Several units of one debugger are patched together; an
  ``is null`` condition on one patches the layer's NaN/Inf values. A statistic of a whole layer
  (``layer3_stats.sparsity``) or of something else than units (``entropy_head3``, Grad-CAM's ``centroid_x``)
  names no unit: patching a whole layer to its mean removes all it carries, which tests nothing.
- otherwise, where the run captured Grad-CAM: the region where the finding's failing datapoints put more cam
  mass than passing datapoints do (``cam_region``) is masked.

Lists never verifiable: ``label_issues`` (a wrong label is tested by relabelling, not by patching the model),
``dead_units`` (a unit with one value for every datapoint: its mean is that value, so patching it changes
nothing), ``restatements`` (no cause, no datapoints) and ``confusions`` (what fails, not why).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from analysis.findings import FindingsFileError, decode_idx
from analysis.intervention import InputMask, InterventionPlan, NotVerifiable, UnitPatch

NOT_VERIFIABLE = {
    "label_issues": "a suspected label error is tested by relabelling the datapoint, not by patching the model",
    "dead_units": "a dead unit has one value for every datapoint, which is its mean: patching it changes nothing",
    "restatements": "a column that restates the failure is no cause: there is nothing to intervene on",
    "confusions": "a confusion says what fails, not why: verify the slice or subgroup that explains it",
}
FAMILIES = ("meta", "internals")  # Findings.to_dict()'s families of slices and separating quantities
SEPARATOR_SHARE = 0.1  # a separating quantity stands for the datapoints more failure-like than 90% of passes
MIN_CAM_GAIN = 0.2  # the finding's failures must put this much more (mean, normalised) cam mass somewhere
MIN_CAMS = 5  # failing datapoints with a cam needed to find a region
_UNIT = re.compile(r"(?:c|ch|channel|unit)_?(\d+)", re.IGNORECASE)  # a summary key naming one unit

Plan = Union[InterventionPlan, NotVerifiable]
Target = tuple[Union[UnitPatch, InputMask], str]


@dataclass
class RunFacts:
    """What the adapter needs of the run besides the finding."""

    table_idx: np.ndarray  # the epoch table's idx, sorted
    failed: np.ndarray  # aligned with table_idx
    summaries: frozenset[str]  # debugger summary columns
    layers: dict[str, str]  # debugger name -> the one layer it hooks
    column: Callable[[str], np.ndarray]  # a numeric table column, aligned with table_idx
    # the cam region of failing vs passing idx, with why there is none; None: the run captured no Grad-CAM
    cam_region: Optional[Callable[[np.ndarray, np.ndarray], tuple[Optional[InputMask], str]]] = None


def finding_entries(findings: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(key, finding)`` for every finding of every list of ``findings`` (``Findings.to_dict()``), a family's lists
    named by family (``meta.slices-0``, ``internals.separators-1``, ``subgroups-0``)."""
    lists = {name: entries for name, entries in findings.items() if isinstance(entries, list)}
    lists |= {f"{family}.{name}": entries for family in FAMILIES if isinstance(findings.get(family), dict)
              for name, entries in findings[family].items() if isinstance(entries, list)}
    return [(f"{name}-{position}", entry) for name, entries in lists.items()
            for position, entry in enumerate(entries) if isinstance(entry, dict)]


def plan_for_finding(key: str, finding: dict[str, Any], facts: RunFacts) -> Plan:
    name = finding_name(finding)
    kind = key.rsplit("-", 1)[0]
    if kind in NOT_VERIFIABLE:
        return NotVerifiable(key, name, NOT_VERIFIABLE[kind])
    idx = _datapoints(finding, facts)
    if idx is None:
        return NotVerifiable(key, name, "the finding names no datapoints (no 'idx', no column with a direction)")
    if not len(idx):
        return NotVerifiable(key, name, "the finding holds no datapoint")
    idx = idx[np.isin(idx, facts.table_idx)]
    if not len(idx):
        return NotVerifiable(key, name, "none of the finding's datapoints is in the epoch table")
    target = _region(finding) or _nan_module(finding) or _units(finding, facts)
    if target is None:
        target, why_not = _cam(idx, facts)
        if target is None:
            return NotVerifiable(key, name, f"it names no unit of a layer (a summary column such as "
                                            f"'<debugger>.c5' of a debugger hooking one layer), and {why_not}")
    return InterventionPlan(key, name, idx.tolist(), target[0], target[1])


def finding_name(finding: dict[str, Any]) -> str:
    for field in ("description", "module", "column"):
        if finding.get(field):
            return str(finding[field])
    if finding.get("debugger"):
        return f"cluster in {finding['debugger']}"
    return "finding"


def _datapoints(finding: dict[str, Any], facts: RunFacts) -> Optional[np.ndarray]:
    if "idx" in finding:
        try:
            return np.unique(decode_idx(finding["idx"], "the finding's idx"))
        except FindingsFileError:
            return None
    column = _unit_columns(finding)[:1] or [finding.get("column")]  # a family of units: its best unit
    if column[0] and str(finding.get("direction", "")).endswith("in failures"):
        return failure_side(facts.table_idx, facts.column(column[0]), facts.failed, finding["direction"])
    return None


def _unit_columns(finding: dict[str, Any]) -> list[str]:
    """The unit columns a family's finding lists (``units``: column names, or ``{'column', 'auroc'}`` entries)."""
    units = finding.get("units") or []
    return [u.get("column") if isinstance(u, dict) else u for u in units if isinstance(u, (dict, str))]


def failure_side(idx: np.ndarray, values: np.ndarray, failed: np.ndarray, direction: str,
                 share: float = SEPARATOR_SHARE) -> np.ndarray:
    """The idx of the rows whose value is beyond all but ``share`` of the passing rows' values, on the failures'
    side (``direction``: 'higher in failures' or 'lower in failures'); rows without a value are left out."""
    numbers = values.astype(np.float64)
    usable = np.isfinite(numbers)
    passing = numbers[usable & ~failed]
    if not len(passing):
        return idx[:0]
    higher = direction.startswith("higher")
    cut = np.quantile(passing, 1 - share if higher else share)
    return idx[usable & ((numbers > cut) if higher else (numbers < cut))]


def _region(finding: dict[str, Any]) -> Optional[Target]:
    region = finding.get("region")
    if not isinstance(region, dict) or not isinstance(region.get("box"), list) or len(region["box"]) != 4:
        return None
    top, left, bottom, right = (int(v) for v in region["box"])
    if not (0 <= top < bottom and 0 <= left < right):
        return None
    mask = np.zeros((bottom, right), dtype=bool)
    mask[top:bottom, left:right] = True
    return InputMask(str(region.get("input", "image")), mask), "the finding's input region"


def _nan_module(finding: dict[str, Any]) -> Optional[Target]:
    module = finding.get("module")
    if not isinstance(module, str) or not module:
        return None
    return UnitPatch(module, None, nonfinite_only=True), f"NaN/Inf first appears in {module}"


def _units(finding: dict[str, Any], facts: RunFacts) -> Optional[Target]:
    """The units the finding's summary columns name: those of the first debugger that hooks one layer."""
    conditions = [c for c in finding.get("conditions") or [] if isinstance(c, dict)]
    alike = [name for c in conditions for name in (c.get("same_on") or []) if isinstance(name, str)]
    named = [c.get("column") for c in conditions] + alike + [finding.get("column")] \
        + list(finding.get("columns") or []) + _unit_columns(finding)
    nulls = {c.get("column") for c in conditions if c.get("op") == "is null"}
    nulls |= {name for c in conditions if c.get("op") == "is null" for name in (c.get("same_on") or [])}
    families: dict[str, list[str]] = {}
    for column in dict.fromkeys(c for c in named if isinstance(c, str) and c in facts.summaries):
        debugger = _debugger_of(column, facts.layers)
        if debugger is not None:
            families.setdefault(debugger, []).append(column)
    for debugger, family in families.items():
        layer = facts.layers[debugger]
        if any(column in nulls for column in family):
            return UnitPatch(layer, None, nonfinite_only=True), f"{family[0]} has no value: NaN/Inf in {layer}"
        units = {column: m for column in family if (m := _UNIT.fullmatch(column[len(debugger) + 1:]))}
        if units:
            shown = ", ".join(list(units)[:4]) + (" ..." if len(units) > 4 else "")
            return (UnitPatch(layer, tuple(sorted({int(m.group(1)) for m in units.values()}))),
                    f"{shown}: debugger {debugger} summarises {layer} unit by unit")
    return None


def _debugger_of(column: str, layers: dict[str, str]) -> Optional[str]:
    """The debugger whose summary ``column`` is (``<debugger name>.<key>``; the longest name wins)."""
    names = [name for name in layers if column.startswith(name + ".")]
    return max(names, key=len) if names else None


def _cam(idx: np.ndarray, facts: RunFacts) -> tuple[Optional[Target], str]:
    if facts.cam_region is None:
        return None, "the run captured no Grad-CAM to find an input region in (add a GradCAMDebugger)"
    failing = idx[facts.failed[np.searchsorted(facts.table_idx, idx)]]
    passing = facts.table_idx[~facts.failed & ~np.isin(facts.table_idx, idx)]
    region, why_not = facts.cam_region(failing, passing)
    if region is None:
        return None, why_not
    return (region, "where its failing datapoints put more Grad-CAM mass than passing ones"), ""


def cam_region(outputs: Mapping[int, dict[str, Any]], debugger: str, input_key: str, failing: np.ndarray,
               passing: np.ndarray, max_rows: int = 256) -> tuple[Optional[InputMask], str]:
    """The pixels where the mean cam of ``failing`` exceeds that of ``passing`` by at least half its largest
    excess, which must reach ``MIN_CAM_GAIN`` (cams are normalised to [0, 1]); else None and why.

    ``outputs``: the epoch's debug outputs (``idx -> {debugger: output}``); at most ``max_rows`` of each side
    are read (evenly spaced), each one datapoint's record."""
    means = []
    for rows in (failing, passing):
        rows = rows[np.linspace(0, len(rows) - 1, min(len(rows), max_rows)).astype(int)] if len(rows) else rows
        cams = [_cam_of(outputs, int(i), debugger) for i in rows]
        cams = [cam for cam in cams if cam is not None]
        if len(cams) < MIN_CAMS or len({cam.shape for cam in cams}) > 1:
            return None, f"fewer than {MIN_CAMS} of its {'failing' if rows is failing else 'passing'} datapoints " \
                         f"have a Grad-CAM of one size in '{debugger}'"
        means.append(np.mean(cams, axis=0))
    gain = means[0] - means[1]
    if gain.max() < MIN_CAM_GAIN:
        return None, (f"its failing datapoints put no more Grad-CAM mass anywhere than passing ones (largest "
                      f"excess {gain.max():.2f} < {MIN_CAM_GAIN})")
    return InputMask(input_key, gain >= gain.max() / 2), ""


def _cam_of(outputs: Mapping[int, dict[str, Any]], idx: int, debugger: str) -> Optional[np.ndarray]:
    try:
        output = outputs[idx].get(debugger)
    except KeyError:
        return None
    cam = output.get("cam") if isinstance(output, dict) else None
    cam = np.asarray(cam, dtype=np.float64) if cam is not None else None
    return cam if cam is not None and cam.ndim == 2 and np.isfinite(cam).all() else None
