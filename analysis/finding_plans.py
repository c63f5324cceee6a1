"""From a finding, as ``Findings.to_dict()`` writes it, to a check: the one place that reads findings.

``finding_entries(findings)`` names each finding ``<list>-<position>`` (``meta.slices-0``, ``nan_origins-0``);
``plan_for_finding(key, finding, facts)`` turns one into an ``InterventionPlan``, a ``ReplicationPlan`` or says why
no check can test it (``NotVerifiable``: no verify button). The fields it reads, each optional:

- ``idx``: the finding's datapoints (a list, or ``analysis.findings``' bitmap of a large group). Without it, a
  finding with a ``column`` (a family's: its best unit) and a ``direction`` (a separating quantity) stands for
  the datapoints whose value is more failure-like than that of 90% of the passing ones (``failure_side``): all
  of a group the quantity marks, so that none of it is left to the control.
- ``description``, else ``module``, ``column`` or ``debugger``: the finding's name in the report.

What is checked, first that applies:

1. What the finding names, patched (the verdict is the intervention's):
   - ``region``: ``{"input": key, "box": [top, left, bottom, right]}`` (pixels, end excluded): that input region;
   - ``module``: a module where NaN/Inf first appears: its NaN/Inf values;
   - the units its columns name: ``conditions[*].column`` and ``conditions[*].same_on`` (a slice), ``column``,
     ``columns``, ``units``. A debugger summary column ``<debugger>.<key>`` of a debugger that hooks one layer
     names a unit of that layer when its key is ``c5``, ``ch5``, ``channel5`` or ``unit5``, and attention head 5
     when it ends in ``head5`` (``entropy_head5``). A family of units (``layer3_energy.c*``) is patched at every
     unit of it that separates failures from passes on its own (``separating_units``: as many as there are, not
     the few a report lists), so that a cause spread over many units is tested whole. An ``is null`` condition on
     a unit patches the layer's NaN/Inf values. A statistic of a whole layer (``layer3_stats.sparsity``) names no
     unit: patching a whole layer to its mean removes all it carries, which tests nothing.
2. A part where the finding's datapoints differ, tried first (its verdict holds where it confirms; otherwise the
   replication, where the finding has one, gives the verdict, with what was tried: the failures may have a cause
   the part tried does not carry):
   - a subgroup in the feature space a ``LayerOutputDebugger`` captured from one layer: the units along which its
     datapoints lie apart from the passing ones (``subgroup_units``), shifted at every position by the passing
     mean minus the subgroup's (in that space: the units' means over their positions). Its datapoints land among
     the passing ones where the subgroup was found, each keeping its own variation (a mean patch would erase that
     too, and with it what tells their classes apart);
   - the region, window or span where its failing datapoints put more Grad-CAM mass than passing ones
     (``cam_region``), where the run captured Grad-CAM;
   - the prompt of a promptable segmentation, moved into its object (``RunFacts.prompt``).
3. A held-out replication (``analysis/replication.py``): a slice or a separating quantity of either family, a
   subgroup or a training-label group of a captured feature space.

Never checked (no button): ``label_issues`` (a wrong label is tested by relabelling, not by patching the model),
``dead_units`` (a unit with one value for every datapoint: its mean is that value, so patching it changes
nothing), ``restatements`` (no cause, no datapoints), ``confusions`` (what fails, not why); and a subgroup or a
suspect group none of the above fits.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np
from scipy.ndimage import binary_dilation
from scipy.stats import mannwhitneyu

from analysis.findings import Condition, FindingsFileError, decode_idx
from analysis.intervention import (
    HEADS,
    MEAN,
    InputMask,
    InterventionPlan,
    NotVerifiable,
    PromptMove,
    UnitPatch,
    UnitShift,
)
from analysis.replication import FAMILIES, SEPARATOR, SLICE, SUBGROUP, ReplicationPlan

NOT_VERIFIABLE = {
    "label_issues": "a suspected label error is tested by relabelling the datapoint, not by patching the model",
    "dead_units": "a dead unit has one value for every datapoint, which is its mean: patching it changes nothing",
    "restatements": "a column that restates the failure is no cause: there is nothing to intervene on",
    "confusions": "a confusion says what fails, not why: verify the slice or subgroup that explains it",
}
SEPARATOR_SHARE = 0.1  # a separating quantity stands for the datapoints more failure-like than 90% of passes
MIN_CAM_GAIN = 0.2  # the finding's failures must put this much more (mean, normalised) cam mass somewhere
MIN_CAMS = 5  # failing datapoints with a cam needed to find a region
SIGNIFICANCE = 0.05  # a unit separates when its Mann-Whitney p times the units tested is below this
SPACE_GROUPS = ("subgroups", "training_label_groups")  # groups found in a captured feature space
MIN_SUBGROUP_AUROC = 0.7  # ... and, for a subgroup's units, when its AUROC against passing ones reaches this
TEST_ROWS = 100_000  # rows a unit's test reads at most (a random sample above)
_UNIT = re.compile(r"(?:c|ch|channel|unit)_?(\d+)", re.IGNORECASE)  # a summary key naming one unit
_HEAD = re.compile(r".*head_?(\d+)", re.IGNORECASE)  # ... naming one attention head

Plan = Union[InterventionPlan, ReplicationPlan, NotVerifiable]
Target = tuple[Union[UnitPatch, UnitShift, InputMask, PromptMove], str]
Vectors = tuple[np.ndarray, np.ndarray]  # (idx, (n, units)) of a debugger's captured feature space


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
    vectors: Optional[Callable[[str], Optional[Vectors]]] = None  # a layer output's captured feature space
    prompt: Optional[PromptMove] = None  # the datapoints are prompted segmentations: their prompt can be moved


def finding_entries(findings: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(key, finding)`` for every finding of every list of ``findings`` (``Findings.to_dict()``), a family's lists
    named by family (``meta.slices-0``, ``internals.separators-1``, ``subgroups-0``)."""
    lists = {name: entries for name, entries in findings.items() if isinstance(entries, list)}
    lists |= {f"{family}.{name}": entries for family in FAMILIES if isinstance(findings.get(family), dict)
              for name, entries in findings[family].items() if isinstance(entries, list)}
    return [(f"{name}-{position}", entry) for name, entries in lists.items()
            for position, entry in enumerate(entries) if isinstance(entry, dict)]


def not_offered(key: str, roles: Mapping[str, Any]) -> Optional[str]:
    """Why no check can test finding ``key``, decided from its kind and the epoch table's ``roles`` alone (no model:
    the Failures tab offers no verify button then, and ``--verify`` skips it); None where a check can. A slice, a
    separating quantity and a subgroup can always be replicated, a NaN origin patched; a group of label suspects
    (which all fail: no replication tells anything) only tested by the input its failures share."""
    kind = key.rsplit("-", 1)[0]
    if kind in NOT_VERIFIABLE:
        return NOT_VERIFIABLE[kind]
    if kind == "suspect_groups" and not roles.get("input_region"):
        return ("a group of suspected label errors is tested by the part of the input its failures share, and the "
                "run captured no Grad-CAM to find one in (add a GradCAMDebugger)")
    return None


def plan_for_finding(key: str, finding: dict[str, Any], facts: RunFacts) -> Plan:
    """The check of finding ``key`` (the module docstring's order), or why none can test it."""
    name = finding_name(finding)
    kind = key.rsplit("-", 1)[0]
    if kind in NOT_VERIFIABLE:
        return NotVerifiable(key, name, NOT_VERIFIABLE[kind])
    idx = _datapoints(finding, facts)
    idx = idx[np.isin(idx, facts.table_idx)] if idx is not None else np.zeros(0, dtype=np.int64)
    replication = _replication(key, kind, finding, name, idx)
    if not len(idx):  # a flag whose passing datapoints hold it too leaves none beyond 90% of them
        return replication or NotVerifiable(key, name, "none of the finding's datapoints is in the epoch table "
                                                       "(it names none: no 'idx', no column with a direction)")
    named = _region(finding) or _nan_module(finding) or _units(finding, facts)
    if named is not None:
        return InterventionPlan(key, name, idx.tolist(), *named, replication=replication)
    derived, why_not = _subgroup(kind, finding, idx, facts) or _cam(idx, facts)
    derived = derived or ((facts.prompt, "a promptable segmentation: does the prompt's place fail them?")
                          if facts.prompt is not None and kind != "suspect_groups" else None)
    if derived is not None:
        return InterventionPlan(key, name, idx.tolist(), *derived, replication=replication, named=False)
    if replication is not None:
        return replication
    what = "a subgroup" if kind in SPACE_GROUPS else "a group of suspected label errors" \
        if kind == "suspect_groups" else "it"
    return NotVerifiable(key, name, f"{what} names no unit of a layer to patch, {why_not}, and it is no slice or "
                                    "separating quantity to replicate on held-out datapoints")


def _replication(key: str, kind: str, finding: dict[str, Any], name: str,
                 idx: np.ndarray) -> Optional[ReplicationPlan]:
    """The held-out replication of a slice or a separating quantity (of its family, read off the key), or of a
    subgroup or a training-label group of a captured feature space."""
    if kind in SPACE_GROUPS:
        return ReplicationPlan(key, name, idx.tolist(), SUBGROUP)
    family = key.split(".", 1)[0] if "." in kind else finding.get("family")
    family = family if family in FAMILIES else None
    if kind.endswith("slices"):
        conditions = [Condition(str(c["column"]), str(c["op"]), c.get("value"))
                      for c in [*(finding.get("conditions") or []), finding.get("label")]  # a class slice's class
                      if isinstance(c, dict) and c.get("column") and c.get("op") in ("=", "<", ">=", "is null")]
        return ReplicationPlan(key, name, idx.tolist(), SLICE, family, conditions) if conditions else None
    column, direction = finding.get("column"), str(finding.get("direction", ""))
    if kind.endswith("separators") and isinstance(column, str) and direction.endswith("in failures"):
        return ReplicationPlan(key, name, idx.tolist(), SEPARATOR, family, column=column, direction=direction)
    return None


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
    """The units (or attention heads) the finding's summary columns name: those of the first debugger that hooks
    one layer; a family of units at every unit of it that separates."""
    conditions = [c for c in finding.get("conditions") or [] if isinstance(c, dict)]
    alike = [name for c in conditions for name in (c.get("same_on") or []) if isinstance(name, str)]
    family = finding.get("column") if str(finding.get("column", "")).endswith("*") else None
    separating = separating_units(family, facts) if family else []
    named = [c.get("column") for c in conditions] + alike + [finding.get("column")] \
        + list(finding.get("columns") or []) + _unit_columns(finding) + separating
    nulls = {c.get("column") for c in conditions if c.get("op") == "is null"}
    nulls |= {name for c in conditions if c.get("op") == "is null" for name in (c.get("same_on") or [])}
    families: dict[str, list[str]] = {}
    for column in dict.fromkeys(c for c in named if isinstance(c, str) and c in facts.summaries):
        debugger = _debugger_of(column, facts.layers)
        if debugger is not None:
            families.setdefault(debugger, []).append(column)
    for debugger, columns in families.items():
        layer = facts.layers[debugger]
        if any(column in nulls for column in columns):
            return UnitPatch(layer, None, nonfinite_only=True), f"{columns[0]} has no value: NaN/Inf in {layer}"
        for pattern, kind, what in ((_UNIT, "units", "unit by unit"), (_HEAD, HEADS, "head by head")):
            units = {column: m for column in columns if (m := pattern.fullmatch(column[len(debugger) + 1:]))}
            if units:
                return (UnitPatch(layer, tuple(sorted({int(m.group(1)) for m in units.values()})), kind=kind),
                        _why_units(list(units), family, separating, debugger, layer, what))
    return None


def _why_units(columns: list[str], family: Optional[str], separating: list[str], debugger: str, layer: str,
               what: str) -> str:
    shown = ", ".join(columns[:4]) + (" ..." if len(columns) > 4 else "")
    extent = f"the {len(separating)} units of {family} that separate failures from passes on their own, all of " \
             f"them; " if family and separating else ""
    return f"{extent}{shown}: debugger {debugger} summarises {layer} {what}"


def separating_units(family: str, facts: RunFacts, seed: int = 0) -> list[str]:
    """The columns of the family of units ``family`` (``energy.c*``) that separate failures from passes on their
    own: two-sided Mann-Whitney p times the family's size below ``SIGNIFICANCE`` (the family's own test, unit by
    unit), on up to ``TEST_ROWS`` rows."""
    pattern = re.compile(re.escape(family).replace(r"\*", r"\d+"))
    members = sorted(c for c in facts.summaries if pattern.fullmatch(c))
    rows = np.arange(len(facts.failed))
    if len(rows) > TEST_ROWS:
        rows = np.sort(np.random.default_rng(seed).choice(rows, TEST_ROWS, replace=False))
    failed = facts.failed[rows]
    found = []
    for column in members:
        values = facts.column(column)[rows].astype(np.float64)
        usable = np.isfinite(values)
        failing, passing = values[usable & failed], values[usable & ~failed]
        if len(failing) and len(passing) and np.ptp(values[usable]) > 0 \
                and mannwhitneyu(failing, passing).pvalue * len(members) < SIGNIFICANCE:
            found.append(column)
    return found


def _subgroup(kind: str, finding: dict[str, Any], idx: np.ndarray,
              facts: RunFacts) -> Optional[tuple[Optional[Target], str]]:
    """A subgroup of a feature space captured from one layer: the units along which it lies apart, moved."""
    debugger = finding.get("debugger")
    if kind not in SPACE_GROUPS or facts.vectors is None or debugger not in facts.layers:
        return None
    captured = facts.vectors(debugger)
    if captured is None:
        return None
    units, offsets, total = subgroup_units(*captured, idx, facts)
    if not units:
        return None
    return (UnitShift(facts.layers[debugger], tuple(units), tuple(offsets)),
            f"{len(units)} of the {total} units of {debugger}'s space set its datapoints apart from the passing ones "
            f"(Mann-Whitney, Bonferroni over units, AUROC >= {MIN_SUBGROUP_AUROC}): all of them, by its offset"), ""


def subgroup_units(vector_idx: np.ndarray, vectors: np.ndarray, idx: np.ndarray,
                   facts: RunFacts) -> tuple[list[int], list[float], int]:
    """The units (columns of ``vectors``) whose values on the subgroup ``idx`` differ from those on the passing
    datapoints outside it (Mann-Whitney p times the units below ``SIGNIFICANCE`` and AUROC, either way, at least
    ``MIN_SUBGROUP_AUROC``), the shift that takes the subgroup's mean there to the passing ones' (the passing mean
    minus its own), and how many units the space has."""
    known = np.isin(vector_idx, facts.table_idx)
    vector_idx, vectors = vector_idx[known], vectors[known]
    members = np.isin(vector_idx, idx)
    passing = ~members & ~facts.failed[np.searchsorted(facts.table_idx, vector_idx)]
    if members.sum() < 2 or passing.sum() < 2:
        return [], [], vectors.shape[1]
    test = mannwhitneyu(vectors[members], vectors[passing], axis=0)
    auroc = np.asarray(test.statistic, dtype=np.float64) / (members.sum() * passing.sum())
    strong = (np.asarray(test.pvalue) * vectors.shape[1] < SIGNIFICANCE) \
        & (np.maximum(auroc, 1 - auroc) >= MIN_SUBGROUP_AUROC)
    units = np.flatnonzero(strong)
    shift = vectors[passing][:, units].mean(axis=0) - vectors[members][:, units].mean(axis=0)
    return units.tolist(), shift.tolist(), vectors.shape[1]


def _debugger_of(column: str, layers: dict[str, str]) -> Optional[str]:
    """The debugger whose summary ``column`` is (``<debugger name>.<key>``; the longest name wins)."""
    names = [name for name in layers if column.startswith(name + ".")]
    return max(names, key=len) if names else None


def _cam(idx: np.ndarray, facts: RunFacts) -> tuple[Optional[Target], str]:
    if facts.cam_region is None:
        return None, "the run captured no Grad-CAM to find a part of the input in (add a GradCAMDebugger)"
    failing = idx[facts.failed[np.searchsorted(facts.table_idx, idx)]]
    passing = facts.table_idx[~facts.failed & ~np.isin(facts.table_idx, idx)]
    region, why_not = facts.cam_region(failing, passing)
    if region is None:
        return None, why_not
    return (region, "where its failing datapoints put more Grad-CAM mass than passing ones"), ""


def cam_region(outputs: Mapping[int, dict[str, Any]], debugger: str, input_key: str, failing: np.ndarray,
               passing: np.ndarray, fill: str = MEAN, max_rows: int = 256) -> tuple[Optional[InputMask], str]:
    """The positions (pixels, samples of a signal, tokens) where the mean cam of ``failing`` exceeds that of
    ``passing`` by at least half its largest excess, which must reach ``MIN_CAM_GAIN`` (cams are normalised to
    [0, 1]), widened on each side by half a cell of the layer the cam was upsampled from (its ``layer_size``): the
    upsampling blurs a cell's edge, and a part of the input the region leaves out may still carry the cause; else
    None and why.

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
    region = binary_dilation(gain >= gain.max() / 2, np.ones(_cell(outputs, failing, debugger, gain.shape), bool))
    return InputMask(input_key, region, fill), ""


def _cell(outputs: Mapping[int, dict[str, Any]], failing: np.ndarray, debugger: str,
          shape: tuple[int, ...]) -> tuple[int, ...]:
    """The size of one cell of the cam's layer in input positions (odd, to widen a region evenly; 1 where the cam
    records no ``layer_size``)."""
    try:
        output = outputs[int(failing[0])].get(debugger) if len(failing) else None
    except KeyError:
        output = None
    size = output.get("layer_size") if isinstance(output, dict) else None
    if not isinstance(size, list) or len(size) != len(shape) or not all(isinstance(n, int) and n > 0 for n in size):
        return (1,) * len(shape)
    return tuple(2 * (-(-full // cells) // 2) + 1 for full, cells in zip(shape, size))


def _cam_of(outputs: Mapping[int, dict[str, Any]], idx: int, debugger: str) -> Optional[np.ndarray]:
    try:
        output = outputs[idx].get(debugger)
    except KeyError:
        return None
    cam = output.get("cam") if isinstance(output, dict) else None
    cam = np.asarray(cam, dtype=np.float64) if cam is not None else None
    return cam if cam is not None and 1 <= cam.ndim <= 3 and np.isfinite(cam).all() else None
