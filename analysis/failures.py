"""Why do they fail: ranked findings about one epoch's failing datapoints.

``analyze(run, epoch=None)`` (a notebook's entry point; ``python -m runners.analyze`` prints the same, and the
trainer stores it after each validation epoch) reads the epoch table (and, for captured epochs, the debug pages and
the run's earlier epoch tables) and returns ``Findings`` (``analysis/findings.py``):

- three families ranked apart (``analysis/columns.py``): **meta info** (what the data says: what a user can
  change), **internals** (the debuggers' summaries: what the model does) and **inputs** (what the captured inputs
  hold: the share of rare tokens, ``analysis/rare_tokens.py``), each with its slices (``analysis/slices.py``) and
  separating quantities (``analysis/separators.py``); a family of per-unit columns counts once;
- restatements of the failure (the model's output under another name, ``analysis/outcomes.py``), listed apart,
  never a slice or a separating quantity;
- subgroups: dense groups in a captured feature space that fail far more (``analysis/subgroups.py``);
- every internal finding described in meta terms (``analysis/meta_terms.py``, ``analysis/explain.py``), and a group
  that several families find, reported once;
- suspected label errors told apart from systematic subgroups (``analysis/label_noise.py``), with the data map of
  the run's validation epochs (``analysis/data_map.py``);
- NaN origins, dead units, the confusion matrix and its main confusions (``analysis/confusions.py``);
- slices within one class (``analysis/class_slices.py``), a note on each finding that mostly restates one class
  (``analysis/class_restatements.py``), and, for a family that names no slice, why not in numbers
  (``analysis/weak_evidence.py``).

The run's tags (given in the viewer) are meta columns too; they and the inputs' columns come from the run folder
(``analysis/run_columns.py``).

The failure definition is configurable: by default the one the run named (``config['failure_definition']``, kept
in the table's roles), else a wrong prediction when the table has labels and predictions, otherwise the worst
``worst_fraction`` of a score column (any score: an IoU, a loss), so nothing here assumes a classifier.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from sklearn.metrics import confusion_matrix

from analysis.class_names import class_name
from analysis.class_restatements import note_class_restatements
from analysis.class_slices import class_slices
from analysis.columns import UNIT, Columns, split_columns
from analysis.confusions import main_confusions
from analysis.data_map import data_map, read_history
from analysis.epoch_table import FAILURE_DEFINITION_ROLE, EpochTable
from analysis.explain import explain, rows_of
from analysis.failure_groups import Neighbourhoods, failure_groups, neighbourhoods, residual_variants
from analysis.findings import DeadUnit, FamilyFindings, Findings, on_the_label_alone, save_findings
from analysis.internals import CapturedInternals, read_internals
from analysis.label_noise import suspected_label_errors
from analysis.meta_terms import MetaVocabulary
from analysis.outcomes import measured_restatements
from analysis.rare_tokens import MEANING, PREFIX, SHARE
from analysis.run_columns import run_columns
from analysis.separators import separating_quantities
from analysis.slices import find_slices
from analysis.subgroups import distinct_groups, find_subgroups, reduced_space
from analysis.table_checks import AnalysisError, check_table
from analysis.weak_evidence import why_no_slice
from run_dir import EpochDir, RunDir
from run_dir.errors import EpochNotFoundError
from run_dir.findings_file import epoch_signature
from run_dir.names import EPOCH_TABLE_FILE

__all__ = ["AnalysisError", "FailureDefinition", "Findings", "analyze", "analyze_table", "resolve_epoch_dir"]

LIST_COLUMNS = ("probabilities",)


@dataclass
class FailureDefinition:
    """Which datapoints count as failures.

    ``metric=None``: the definition the run named (the table's ``failure_definition`` role), else a wrong
    prediction (``label != prediction``). Otherwise the worst ``worst_fraction`` of that score column (its direction
    from the table's roles; a missing score counts as a failure).
    """

    metric: Optional[str] = None
    worst_fraction: float = 0.1

    def failed(self, table: EpochTable, values: dict[str, np.ndarray]) -> tuple[np.ndarray, str]:
        named = table.roles.get(FAILURE_DEFINITION_ROLE)
        if self.metric is None and isinstance(named, dict) and isinstance(named.get("metric"), str):
            failed, definition = FailureDefinition(named["metric"], named["worst_fraction"]).failed(table, values)
            return failed, f"{definition} (the run's failure_definition)"
        if self.metric is None and "label" in values and "prediction" in values:
            return values["label"] != values["prediction"], "wrong prediction (label != prediction)"
        metric = self.metric or _default_metric(table)
        if not 0 < self.worst_fraction < 1:
            raise AnalysisError(f"worst_fraction must be between 0 and 1, got {self.worst_fraction}")
        _check_score(table, metric)
        scores = (values[metric] if metric in values else table.values([metric])[metric]).astype(np.float64)
        higher_is_better = table.roles.get("higher_is_better", {}).get(metric, True)
        failed, cut, ties = worst_rows(-scores if higher_is_better else scores, self.worst_fraction)
        op = ("<" if higher_is_better else ">") + ("=" if ties else "")
        shown = "no score" if cut is None else f"{metric} {op} {-cut if higher_is_better else cut:.3g}"
        missing = ", or no score" if cut is not None and np.isnan(scores).any() else ""
        at_cut = "ties at the cut fail together" if ties else "rows at the cut pass (with them all would fail)"
        return failed, (f"worst {self.worst_fraction:.0%} of {metric} asked, {failed.mean():.1%} fail: {shown}"
                        f"{missing}; {at_cut}")


def worst_rows(badness: np.ndarray, fraction: float) -> tuple[np.ndarray, Optional[float], bool]:
    """The rows among the worst ``fraction`` (higher ``badness`` is worse), the cut value (None: the NaN rows)
    and whether the rows equal to it fail.

    NaN rows (no score) are the worst. Rows tied with the ceil(fraction * n)-th worst value fail together, so
    the share can exceed ``fraction``; when the tie would take every row, only the rows strictly worse fail.
    """
    missing = np.isnan(badness)
    wanted = max(1, math.ceil(fraction * len(badness)))
    if missing.sum() >= wanted or missing.all():
        return missing, None, True
    cut = float(np.sort(badness[~missing])[::-1][wanted - missing.sum() - 1])
    failed = missing | (badness >= cut)
    if failed.all():
        return missing | (badness > cut), cut, False
    return failed, cut, True


def analyze(run: str, epoch: Optional[int] = None, failure: Optional[FailureDefinition] = None,
            min_size: Optional[int] = None, top: int = 10, save: bool = False) -> Findings:
    """Findings for ``run`` (a trainer work dir, an evaluator work dir, or an ``epoch_N`` folder).

    ``epoch=None`` picks the last epoch with a table, preferring one whose debug outputs were captured. ``save``:
    store them in the epoch's folder (``findings.json``, with the signature its inputs had before the analysis
    began: the viewer reads them only while the epoch's table and debug outputs are as they were).
    """
    epoch_dir = resolve_epoch_dir(run, epoch)
    signature = epoch_signature(epoch_dir)
    table = EpochTable(EpochDir(epoch_dir).table)
    findings = analyze_table(table, read_internals(epoch_dir), failure or FailureDefinition(), min_size, top,
                             epoch_dir)
    if save:
        save_findings(epoch_dir, findings, signature)
    return findings


def analyze_table(table: EpochTable, internals: Optional[CapturedInternals] = None,
                  failure: Optional[FailureDefinition] = None, min_size: Optional[int] = None,
                  top: int = 10, epoch_dir: Optional[str] = None) -> Findings:
    """Findings for one epoch table (and the captured internals of its epoch, and the run's earlier epoch tables
    where ``epoch_dir`` is in a trainer's run)."""
    check_table(table)
    names = [name for name, _ in table.columns()]
    values = table.arrays(names + [name for name in LIST_COLUMNS if table.has_column(name)])
    derived, derived_notes = run_columns(epoch_dir, values["idx"]) if epoch_dir else ({}, [])
    values.update(derived)  # tags are meta columns like any other; the inputs' a family of their own (columns.py)
    failed, definition = (failure or FailureDefinition()).failed(table, values)
    n = len(failed)
    min_size = min_size or max(10, math.ceil(0.01 * n))
    findings = Findings(table.path, definition, n, int(failed.sum()))
    findings.notes += derived_notes
    columns = _columns(table, values, failed)
    findings.restatements = columns.restatements
    idx, layers = values["idx"], table.roles.get("layers", {})
    vocabulary = MetaVocabulary(columns.meta, min_size)
    findings.meta = FamilyFindings(find_slices(columns.meta, failed, idx, min_size, top,
                                               exclusive=columns.label_copies),
                                   *_top(separating_quantities({name: values for name, values in columns.meta.items()
                                                                if name not in columns.label_copies}, failed), top))
    findings.inputs = FamilyFindings(find_slices(columns.inputs, failed, idx, min_size, top, family="inputs"),
                                     *_top(separating_quantities(columns.inputs, failed), top))
    findings.internals = FamilyFindings(find_slices(columns.internals, failed, idx, min_size, top,
                                                    families=columns.families, family="internals"),
                                        *_top(separating_quantities(columns.internals, failed, columns.families), top))
    for found in findings.internals.slices:
        for condition in found.conditions:
            condition.same_on += columns.same_as.get(condition.column, [])
    _why_no_slices(findings, columns, failed, min_size)
    near, grouped = None, np.zeros(n, dtype=bool)
    if internals is not None:
        findings.notes += [internals.problem] if internals.problem else []
        findings.subgroups = find_subgroups(internals, idx, failed, vocabulary, min_size, layers, findings.notes)
        findings.nan_origins = internals.nan_origins[:top]
        near, grouped = _groups_failing_alike(findings, internals, values, failed, vocabulary, min_size, layers,
                                              columns.label_copies)
        findings.subgroups = findings.subgroups[:top]
        findings.training_label_groups = findings.training_label_groups[:top]
    explain(findings, values, failed, vocabulary, layers, set(table.roles.get("input_region", [])))
    findings.class_slices, findings.class_no_slice = class_slices(columns.meta, columns.label_copies, values, failed,
                                                                  min_size, top, findings.meta.slices)
    note_class_restatements(findings, values, failed, columns.label_copies)
    findings.confusions = main_confusions(values, top)
    history = read_history(epoch_dir, idx, findings.notes) if epoch_dir else None
    findings.data_map = data_map(history, idx, failed) if history is not None else None
    findings.label_issues, findings.suspect_groups, findings.label_issues_note = suspected_label_errors(
        values, failed, _explaining(findings, idx, columns), near, vocabulary, history, top, grouped)
    findings.dead_units = dead_units(values, table.roles.get("summaries", []))
    findings.notes += [MEANING] if _names_rare_tokens(findings) else []
    findings.confusion = confusion(values)
    return findings


def _groups_failing_alike(findings: Findings, internals: CapturedInternals, values: dict[str, np.ndarray],
                          failed: np.ndarray, vocabulary: MetaVocabulary, min_size: int, layers: dict[str, str],
                          label_columns: frozenset[str]) -> tuple[Optional[Neighbourhoods], np.ndarray]:
    """The neighbourhoods of the suspects' feature space and the groups that fail alike in it
    (``analysis/failure_groups.py``): systematic groups in ``findings.training_label_groups``, variants among the
    subgroups, then the variants of several labels among the rows no slice or group explains (after the others: what
    remains). Also the bool mask of the rows of the first two kinds (and of the groups a meta condition shifts),
    which leave the label suspects; a variant of several labels is a region of mixed labels the model cannot tell
    apart, where a flipped label still shows, so its datapoints stay."""
    name, space = _suspects_space(internals, values["idx"])
    near = neighbourhoods(name, space) if space is not None and "label" in values and "prediction" in values \
        else None
    if near is None:
        return None, np.zeros(len(failed), dtype=bool)
    systematic, variants, grouped = failure_groups(near, values, failed, vocabulary, min_size, layers.get(name),
                                                   label_columns)
    findings.training_label_groups = systematic
    findings.subgroups = distinct_groups(findings.subgroups, variants, systematic)
    for group in [*systematic, *(found for found in findings.subgroups if found.kind == "variant")]:
        grouped |= rows_of(values["idx"], group.idx)
    explained = grouped.copy()
    for found in [*findings.meta.slices, *findings.inputs.slices]:
        if not on_the_label_alone(found.conditions, label_columns):
            explained |= rows_of(values["idx"], found.idx)
    left = residual_variants(near, values, failed, vocabulary, min_size, layers.get(name), explained)
    findings.subgroups += distinct_groups([], left, [*systematic, *findings.subgroups])
    return near, grouped


def _columns(table: EpochTable, values: dict[str, np.ndarray], failed: np.ndarray) -> Columns:
    """The analysed columns by family, with the restatements of the failure (declared and measured) left out."""
    declared = {name: f"declared an outcome by debugger '{name.split('.', 1)[0]}'"
                for name in table.roles.get("outcome", [])}
    columns = split_columns({name: values[name] for name in values if name not in LIST_COLUMNS}, table.roles,
                            declared)
    if "probabilities" in values:
        hooked = set(table.roles.get("layers", {}))  # a layer's activations come before the output: never measured
        candidates = {**columns.meta, **{name: column for name, column in columns.internals.items()
                                         if name.split(".", 1)[0] not in hooked}}
        measured = measured_restatements(candidates, values["probabilities"], values.get("label"),
                                         values.get("logsumexp"), failed)
        for restatement in measured:
            columns.meta.pop(restatement.column, None)
            columns.internals.pop(restatement.column, None)
        columns.restatements += measured
    return columns


def _why_no_slices(findings: Findings, columns: Columns, failed: np.ndarray, min_size: int) -> None:
    """Say why, in numbers, for each family with columns that names no slice."""
    if columns.meta and not findings.meta.slices:
        findings.meta.no_slice = why_no_slice(columns.meta, failed, min_size)
    if columns.inputs and not findings.inputs.slices:
        findings.inputs.no_slice = why_no_slice(columns.inputs, failed, min_size)
    if columns.internals and not findings.internals.slices:
        findings.internals.no_slice = why_no_slice(columns.internals, failed, min_size, columns.families)


def _names_rare_tokens(findings: Findings) -> bool:
    """Whether a finding names a rare-token column, which the report then explains."""
    columns = [c.column for found in findings.inputs.slices for c in found.conditions]
    columns += [separator.column for separator in findings.inputs.separators]
    return any(column.startswith(PREFIX) and column.endswith(SHARE) for column in columns)


def _top(found: tuple[list, int], top: int) -> tuple[list, int]:
    return found[0][:top], found[1]


def _suspects_space(internals: CapturedInternals, table_idx: np.ndarray) -> tuple[str, Optional[np.ndarray]]:
    """The captured feature space with the most datapoints (its debugger), reduced, one row per table row (NaN: not
    captured)."""
    if not internals.vectors:
        return "", None
    name, (idx, vectors) = max(internals.vectors.items(), key=lambda item: len(item[1][0]))
    usable = np.isfinite(vectors).all(axis=1)
    space = np.full((len(table_idx), min(16, vectors.shape[1])), np.nan, dtype=np.float32)
    if usable.sum() > space.shape[1]:
        space[np.searchsorted(table_idx, idx[usable])] = reduced_space(vectors[usable])
    return name, space


def _explaining(findings: Findings, idx: np.ndarray, columns: Columns) -> list[tuple[str, str, np.ndarray]]:
    """The reported groups that may explain label suspects: slices not on the label alone, and subgroups."""
    groups = [(s.description, "slice", rows_of(idx, s.idx)) for s in findings.meta.slices
              if not on_the_label_alone(s.conditions, columns.label_copies)]
    groups += [(s.description, "slice", rows_of(idx, s.idx)) for s in findings.inputs.slices]
    groups += [(s.description, "internal slice", rows_of(idx, s.idx)) for s in findings.internals.slices]
    groups += [(f"subgroup of {g.debugger}: {g.description}", "subgroup", rows_of(idx, g.idx))
               for g in findings.subgroups]
    return groups


def dead_units(values: dict[str, np.ndarray], summaries: list[str]) -> list[DeadUnit]:
    """Per-unit summary columns with one value for every datapoint (NaN rows aside) while a sibling unit's
    varies, zeros first: a unit that never responds. A unit's column ends in its number (``energy.c5``,
    ``entropy_head3``); a constant statistic of a whole layer (``nonfinite_ratio`` 0, a ReLU output's ``min``
    0, ``missing_layers`` 0) is what a healthy model gives, not a finding."""
    constant, varying = {}, set()
    for name in summaries:
        column = values.get(name)
        if column is None or column.dtype == object or not UNIT.search(name):
            continue
        finite = column[np.isfinite(column)]
        if len(finite) >= max(2, len(column) // 2) and np.ptp(finite) == 0:
            constant[name] = float(finite[0])
        else:
            varying.add(UNIT.sub("", name))
    dead = [DeadUnit(name, value) for name, value in constant.items() if UNIT.sub("", name) in varying]
    return sorted(dead, key=lambda unit: (unit.value != 0, unit.column))


def confusion(values: dict[str, np.ndarray]) -> Optional[dict[str, Any]]:
    if "label" not in values or "prediction" not in values:
        return None
    predicted = np.isfinite(values["prediction"])  # NaN: logits that were not finite predicted nothing
    labels, predictions = values["label"][predicted], values["prediction"][predicted].astype(np.int64)
    classes = sorted(set(labels.tolist()) | set(predictions.tolist()))
    matrix = confusion_matrix(labels, predictions, labels=classes)
    return {"classes": [class_name(values, c) for c in classes], "class_ids": classes,
            "matrix": matrix.tolist()}


def resolve_epoch_dir(run: str, epoch: Optional[int]) -> str:
    """The folder holding the epoch table to analyse: ``run`` itself (an evaluator's or an epoch folder) or
    ``run/epoch_N`` (``RunDir.epoch_dir``'s rule when ``epoch`` is None)."""
    try:
        return RunDir(run).epoch_dir(epoch, EPOCH_TABLE_FILE)
    except EpochNotFoundError as exc:
        raise AnalysisError(str(exc)) from None


def _default_metric(table: EpochTable) -> str:
    scores = table.roles.get("scores") or []
    if not scores:
        raise AnalysisError(f"{table.path} has neither labels and predictions nor score columns: name a score "
                            "column with FailureDefinition(metric=...) (--failure-metric)")
    return scores[0]


def _check_score(table: EpochTable, metric: str) -> None:
    """A failure metric must be one of the table's score columns (a meta column or a typo is refused)."""
    scores = table.roles.get("scores") or []
    if metric not in scores:
        raise AnalysisError(f"{metric!r} is not a score column of {table.path}; its score columns: "
                            f"{', '.join(scores) or 'none'} (pass one of them to --failure-metric)")
