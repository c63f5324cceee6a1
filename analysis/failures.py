"""Why do they fail: ranked findings about one epoch's failing datapoints.

``analyze(run, epoch=None)`` (a notebook's entry point; ``python -m runners.analyze`` prints the same)
reads the epoch table (and, for captured epochs, the debug pages) and returns ``Findings``:

- slices: groups described by conditions over meta info, labels, predictions and debugger summaries
  that fail more than the rest (``analysis/slices.py`` states the scoring rule);
- separating quantities: numeric columns whose values differ between failures and passes (two-sided
  Mann-Whitney U, ``scipy.stats.mannwhitneyu``, p < 0.05 / columns tested), by AUROC (U over the pairs),
  reported as max(auc, 1 - auc) with its direction;
- embedding clusters and NaN origins from the captured outputs (``analysis/internals.py``);
- suspected label errors: cleanlab's ``find_label_issues`` on the validation probabilities, which are
  out-of-sample for the validation set, ranked by self-confidence, those no failure slice explains first;
- dead units: per-unit summary columns that are the same for every datapoint while a sibling unit varies
  (a dead channel's energy is 0);
- the confusion matrix.

The failure definition is configurable: by default the one the run named (``config['failure_definition']``, kept
in the table's roles), else a wrong prediction when the table has labels and predictions, otherwise the worst
``worst_fraction`` of a score column.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
from cleanlab.filter import find_label_issues
from scipy.stats import mannwhitneyu
from sklearn.metrics import confusion_matrix

from analysis.epoch_table import EPOCH_TABLE_FILE, FAILURE_DEFINITION_ROLE, EpochTable
from analysis.internals import CapturedInternals, EmbeddingCluster, NaNOrigin, embedding_clusters, read_internals
from analysis.slices import ALPHA, Slice, find_slices
from utils.errors import LanternUserError

NOT_SLICED = ("idx", "label", "prediction", "probabilities")
MIN_SEPARATOR_ROWS = 10

_UNIT = re.compile(r"\d+$")  # the number that ends a per-unit column's name


class AnalysisError(LanternUserError):
    """The run, epoch or failure definition cannot be analysed as asked."""


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
        scores = table.values([metric])[metric].astype(np.float64)
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


@dataclass
class Separator:
    column: str
    auroc: float  # max(auc, 1 - auc): 0.5 separates nothing, 1.0 perfectly
    direction: str  # 'higher in failures' or 'lower in failures'
    rows: int


@dataclass
class LabelIssue:
    idx: int
    label: Any
    suggested: Any
    self_confidence: float


@dataclass
class DeadUnit:
    column: str
    value: float


@dataclass
class Findings:
    table_path: str
    failure_definition: str
    datapoints: int
    failures: int
    slices: list[Slice] = field(default_factory=list)
    separators: list[Separator] = field(default_factory=list)
    separators_tested: int = 0  # numeric columns given a Mann-Whitney test (the Bonferroni divisor)
    clusters: list[EmbeddingCluster] = field(default_factory=list)
    label_issues: list[LabelIssue] = field(default_factory=list)
    nan_origins: list[NaNOrigin] = field(default_factory=list)
    dead_units: list[DeadUnit] = field(default_factory=list)
    confusion: Optional[dict[str, Any]] = None  # {'classes': [...], 'matrix': [[...]]}, rows are labels
    notes: list[str] = field(default_factory=list)  # what was left out, and why (unreadable, or clusters under keep)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (slice descriptions included)."""
        data = dataclasses.asdict(self)
        for plain, found in zip(data["slices"], self.slices):
            plain["description"] = found.description
        return data


def analyze(run: str, epoch: Optional[int] = None, failure: Optional[FailureDefinition] = None,
            min_size: Optional[int] = None, top: int = 10) -> Findings:
    """Findings for ``run`` (a trainer work dir, an evaluator work dir, or an ``epoch_N`` folder).

    ``epoch=None`` picks the last epoch with a table, preferring one whose debug outputs were captured.
    """
    epoch_dir = resolve_epoch_dir(run, epoch)
    table = EpochTable(os.path.join(epoch_dir, EPOCH_TABLE_FILE))
    internals = read_internals(epoch_dir)
    return analyze_table(table, internals, failure or FailureDefinition(), min_size, top)


def analyze_table(table: EpochTable, internals: Optional[CapturedInternals] = None,
                  failure: Optional[FailureDefinition] = None, min_size: Optional[int] = None,
                  top: int = 10) -> Findings:
    """Findings for one epoch table (and the captured internals of its epoch, if any)."""
    names = [name for name, _ in table.columns()]
    values = table.values(names + (["probabilities"] if table.has_column("probabilities") else []))
    failed, definition = (failure or FailureDefinition()).failed(table, values)
    n = len(failed)
    min_size = min_size or max(10, math.ceil(0.01 * n))
    sliced = {name: values[name] for name in names if name not in NOT_SLICED and _is_sliceable(table, name)}
    findings = Findings(table.path, definition, n, int(failed.sum()))
    findings.slices = find_slices(sliced, failed, values["idx"], min_size, top=top,
                                  exclusive=_class_columns(sliced, values))
    separators, findings.separators_tested = separating_quantities(sliced, failed)
    findings.separators = separators[:top]
    explained = {i for found in findings.slices for i in found.idx}
    findings.label_issues = suspected_label_errors(values, explained)[:top]
    findings.dead_units = dead_units(values, table.roles.get("summaries", []))
    findings.confusion = confusion(values)
    if internals is not None:
        findings.notes += [internals.problem] if internals.problem else []
        findings.clusters = embedding_clusters(internals, values["idx"], failed, sliced, min_size,
                                               notes=findings.notes)[:top]
        findings.nan_origins = internals.nan_origins[:top]
    return findings


def separating_quantities(columns: dict[str, np.ndarray], failed: np.ndarray) -> tuple[list[Separator], int]:
    """AUROC of every numeric column between failures and passes, strongest first, and how many were tested.

    A column is kept only when its two-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``, whose U over
    the pairs is the AUROC) gives p < 0.05 / (columns tested): under random failures none is listed.
    """
    tested = []
    for name, values in columns.items():
        if values.dtype == object:
            continue
        numbers = values.astype(np.float64)
        usable = np.isfinite(numbers)
        labels = failed[usable]
        if usable.sum() < MIN_SEPARATOR_ROWS or labels.all() or not labels.any() or np.ptp(numbers[usable]) == 0:
            continue
        test = mannwhitneyu(numbers[usable][labels], numbers[usable][~labels])
        auc = float(test.statistic) / (labels.sum() * (~labels).sum())
        tested.append((float(test.pvalue), Separator(name, max(auc, 1 - auc), "higher in failures" if auc >= 0.5
                                                      else "lower in failures", int(usable.sum()))))
    found = [separator for p, separator in tested if p < ALPHA / len(tested)]
    return sorted(found, key=lambda separator: -separator.auroc), len(tested)


def suspected_label_errors(values: dict[str, np.ndarray], explained: frozenset[int] | set[int] = frozenset()
                           ) -> list[LabelIssue]:
    """Datapoints whose label the model's probabilities contradict (cleanlab), most suspicious first.

    Datapoints in ``explained`` (the reported failure slices) come after the others: a slice already says
    why the model contradicts them (a shortcut, a hard group), while a wrong label is an isolated failure.
    """
    if "probabilities" not in values or "label" not in values:
        return []
    probabilities, labels = values["probabilities"].astype(np.float64), values["label"]
    usable = np.isfinite(probabilities).all(axis=1) & (labels >= 0) & (labels < probabilities.shape[1])
    if usable.sum() < 2 * probabilities.shape[1]:
        return []
    rows = np.flatnonzero(usable)
    ranked = find_label_issues(labels[rows].astype(int), probabilities[rows], n_jobs=1,
                               return_indices_ranked_by="self_confidence")
    names = values.get("label_name"), values.get("prediction_name")
    issues = []
    ranked = sorted(ranked, key=lambda position: int(values["idx"][rows[position]]) in explained)  # stable
    for position in ranked:
        row = rows[position]
        label = names[0][row] if names[0] is not None else int(labels[row])
        best = int(np.argmax(probabilities[row]))
        suggested = _class_name(values, best) if names[1] is not None else best
        issues.append(LabelIssue(int(values["idx"][row]), label, suggested,
                                 float(probabilities[row, int(labels[row])])))
    return issues


def dead_units(values: dict[str, np.ndarray], summaries: list[str]) -> list[DeadUnit]:
    """Per-unit summary columns with one value for every datapoint (NaN rows aside) while a sibling unit's
    varies, zeros first: a unit that never responds. A unit's column ends in its number (``energy.c5``,
    ``entropy_head3``); a constant statistic of a whole layer (``nonfinite_ratio`` 0, a ReLU output's ``min``
    0, ``missing_layers`` 0) is what a healthy model gives, not a finding."""
    constant, varying = {}, set()
    for name in summaries:
        column = values.get(name)
        if column is None or column.dtype == object or not _UNIT.search(name):
            continue
        finite = column[np.isfinite(column)]
        if len(finite) >= max(2, len(column) // 2) and np.ptp(finite) == 0:
            constant[name] = float(finite[0])
        else:
            varying.add(_UNIT.sub("", name))
    dead = [DeadUnit(name, value) for name, value in constant.items() if _UNIT.sub("", name) in varying]
    return sorted(dead, key=lambda unit: (unit.value != 0, unit.column))


def confusion(values: dict[str, np.ndarray]) -> Optional[dict[str, Any]]:
    if "label" not in values or "prediction" not in values:
        return None
    predicted = np.isfinite(values["prediction"])  # NaN: logits that were not finite predicted nothing
    labels, predictions = values["label"][predicted], values["prediction"][predicted].astype(np.int64)
    classes = sorted(set(labels.tolist()) | set(predictions.tolist()))
    matrix = confusion_matrix(labels, predictions, labels=classes)
    return {"classes": [_class_name(values, c) for c in classes], "class_ids": classes,
            "matrix": matrix.tolist()}


def resolve_epoch_dir(run: str, epoch: Optional[int]) -> str:
    """The folder holding the epoch table: ``run`` itself (evaluator or epoch folder) or ``run/epoch_N``."""
    if not os.path.isdir(run):
        raise AnalysisError(f"{run!r} is not a folder; pass a run's work dir (e.g. logs/examples/cnn_trainer)")
    here = os.path.isfile(os.path.join(run, EPOCH_TABLE_FILE))
    if here and (epoch is None or os.path.basename(os.path.normpath(run)) == f"epoch_{epoch}"):
        return run
    epochs = _table_epochs(run)
    if not epochs:
        runs = sorted(name for name in os.listdir(run) if _holds_tables(os.path.join(run, name)))
        if runs:
            raise AnalysisError(f"{run} is a folder of runs, not a run: pass one of them to --run, e.g. "
                                f"{os.path.join(run, runs[0])} (runs here: {', '.join(runs[:20])})")
        raise AnalysisError(f"{run} holds no epoch table ({EPOCH_TABLE_FILE}): train or evaluate it first "
                            "with this version of Lantern")
    if epoch is not None:
        if epoch not in epochs:
            raise AnalysisError(f"{run} has no epoch table for epoch {epoch}; epochs with one: {epochs}")
        return os.path.join(run, f"epoch_{epoch}")
    captured = [e for e in epochs if os.path.isdir(os.path.join(run, f"epoch_{e}", "debugger"))]
    return os.path.join(run, f"epoch_{(captured or epochs)[-1]}")


def _table_epochs(run: str) -> list[int]:
    """The epochs of ``run`` with an epoch table, in order."""
    return sorted(int(m.group(1)) for name in os.listdir(run) if (m := re.fullmatch(r"epoch_(\d+)", name))
                  and os.path.isfile(os.path.join(run, name, EPOCH_TABLE_FILE)))


def _holds_tables(folder: str) -> bool:
    """Whether ``folder`` is a run (an evaluator's, with its table, or a trainer's, with epoch tables)."""
    return os.path.isdir(folder) and (os.path.isfile(os.path.join(folder, EPOCH_TABLE_FILE))
                                      or bool(_table_epochs(folder)))


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


def _is_sliceable(table: EpochTable, name: str) -> bool:
    """Meta info, labels, predictions and summaries; never a score, which restates the failure."""
    return name not in table.roles.get("scores", [])


def _class_columns(sliced: dict[str, np.ndarray], values: dict[str, np.ndarray]) -> frozenset[str]:
    """Columns that name the label or the prediction (a meta field copying the label included)."""
    names = {"label", "label_name", "prediction", "prediction_name"}
    copies = {name for name, column in sliced.items() if any(
        key in values and column.dtype == values[key].dtype and np.array_equal(column, values[key])
        for key in ("label", "label_name"))}
    return frozenset(names | copies)


def _class_name(values: dict[str, np.ndarray], class_id: int) -> Any:
    for ids, names in (("label", "label_name"), ("prediction", "prediction_name")):
        if names in values:
            match = np.flatnonzero(values[ids] == class_id)
            if len(match):
                return values[names][match[0]]
    return int(class_id)
