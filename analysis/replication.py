"""A held-out replication: a finding found on one half of the datapoints, tested on the other.

Where no intervention applies (a slice or a separating quantity of meta info, a whole-layer statistic, with no
captured region to mask), or one does not confirm a finding it was not named by (a Grad-CAM region, a moved prompt,
a subgroup moved in its space), a finding can still be tested on datapoints it was not found on. A finding's own numbers
are not that test: it was chosen as the best of many candidates on the very datapoints it is scored on, so its
failure rate flatters it. The replication splits the epoch's datapoints at random into two halves (failing and
passing ones in equal shares, ``--seed``), runs the analysis again on half A (``analyze_table``, with its own
significance levels), and looks there for the finding:

- a slice: the analysis of A over the slice's own columns finds one over the same columns with the same operators
  (and the same values where the operator is '='); its cut of a numeric column may differ, as found on A. Over its
  own columns only: with every column, a slice holding the same failures better on A (a ring outline is a thin
  part) would report them in its place, and the finding would look lost where it was only described otherwise;
- a separating quantity: the whole analysis of A lists the same column, or family of units, with the same
  direction (significant among every quantity A tests).

A subgroup's clusters are found without looking at failures (HDBSCAN on the feature space); only picking the ones
that fail looks at them. So half A picks it again on its own: its datapoints of A must fail more than the rest of A.

What A found is then tested on half B, which took no part in finding it: a slice, or a subgroup's datapoints of B, by
a one-sided Fisher exact test (its failure rate on B above the rest of B's), a separating quantity by a one-sided
Mann-Whitney test (on B its values lie on the failures' side); each at ``LEVEL``, as is a subgroup's test on A. B's
failures are the epoch's own.

The columns an epoch's run folder adds to its table (its tags, the share of rare tokens of its captured inputs:
``analysis/run_columns.py``) are given to the halves as the analysis read them.

Verdicts: **replicated** (found on A, and it holds on B) or **not replicated** (not found on A, or found there and
not holding on B). Never "confirmed": a replicated finding is real on these data, not shown to be a cause.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
from scipy.stats import fisher_exact, mannwhitneyu

from analysis.epoch_table import EpochTable, write_epoch_table
from analysis.failures import FailureDefinition, analyze_table
from analysis.findings import Condition, Findings
from analysis.intervention import OfPlan

REPLICATED, NOT_REPLICATED = "replicated", "not replicated"
LEVEL = 0.05  # one-sided, on half B
SLICE, SEPARATOR, SUBGROUP = "slice", "separator", "subgroup"
FAMILIES = ("meta", "inputs", "internals")
TOP = 50  # findings per list on half A: a finding is looked for among all A lists as significant
KEPT = ("idx", "label", "label_name", "prediction", "prediction_name", "probabilities")  # in every half table


@dataclass
class ReplicationPlan:
    """A finding to replicate: a slice (``conditions``) or a separating quantity (``column``, ``direction``) of
    ``family`` (None: either), or a subgroup (its ``idx``)."""

    key: str
    finding: str
    idx: list[int]
    kind: str
    family: Optional[str] = None
    conditions: list[Condition] = field(default_factory=list)
    column: str = ""
    direction: str = ""


@dataclass
class Replication(OfPlan):
    """What half A found of the finding, and how it held on half B."""

    plan: ReplicationPlan
    verdict: str
    reason: str
    halves: tuple[int, int]  # datapoints in A and in B
    found_as: Optional[str] = None  # the finding as found on A
    inside: Optional[tuple[int, int]] = None  # on B: a slice's (failing, datapoints) inside it ...
    outside: Optional[tuple[int, int]] = None  # ... and in the rest of B
    auroc: Optional[float] = None  # on B: a separating quantity's AUROC in its direction
    p_value: Optional[float] = None
    tried: Optional[dict[str, Any]] = None  # the intervention tried first (Verification.to_dict()) and its verdict
    seconds: float = 0.0

    def describe(self) -> str:
        """On B, in a few words: failing inside against outside, or the AUROC."""
        if self.inside is not None and self.outside is not None:
            (fail_in, size_in), (fail_out, size_out) = self.inside, self.outside
            return f"on B: {fail_in} of {size_in} fail inside ({fail_in / max(size_in, 1):.0%}) against " \
                   f"{fail_out / max(size_out, 1):.0%} outside, p = {self.p_value:.2g}"
        if self.auroc is not None:
            return f"on B: AUROC {self.auroc:.3f}, p = {self.p_value:.2g}"
        return "not tested on B"

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "finding": self.finding, "verdict": self.verdict, "rests_on": "replication",
                "reason": self.reason, "idx": self.plan.idx, "halves": list(self.halves), "found_as": self.found_as,
                "inside": None if self.inside is None else list(self.inside),
                "outside": None if self.outside is None else list(self.outside), "auroc": self.auroc,
                "p_value": self.p_value, "on_b": self.describe(), "tried": self.tried, "seconds": self.seconds}


class HeldOut:
    """The epoch split in two halves, and the analysis of half A (computed once, when first asked)."""

    def __init__(self, table: EpochTable, failed: np.ndarray, failure: FailureDefinition, seed: int = 0,
                 run_columns: Optional[dict[str, np.ndarray]] = None) -> None:
        self.table, self.failure = table, failure
        self.run_columns = run_columns or {}  # the epoch's columns from its run folder, in idx order as the table
        self.idx = table.values(["idx"])["idx"].astype(np.int64)
        self.failed = failed
        rng = np.random.default_rng(seed)
        self.in_a = np.zeros(len(failed), dtype=bool)
        for outcome in (True, False):  # failing and passing datapoints split alike
            rows = np.flatnonzero(failed == outcome)
            self.in_a[rng.choice(rows, size=len(rows) // 2, replace=False)] = True
        self._found: dict[Optional[frozenset[str]], Findings] = {}  # by the columns analysed (None: all)

    def replicate(self, plan: ReplicationPlan) -> Replication:
        halves = (int(self.in_a.sum()), int((~self.in_a).sum()))
        if plan.kind == SUBGROUP:
            return self._subgroup(plan, halves)
        if plan.kind == SLICE:
            found = self._found_on_a(frozenset(c.column for c in plan.conditions))
            match = _same_slice(plan, found)
            if match is None:
                return Replication(plan, NOT_REPLICATED, f"half A's analysis of its columns ({halves[0]} datapoints) "
                                                         "finds no slice over them with the same operators", halves)
            return self._slice_on_b(plan, match, halves)
        match = _same_separator(plan, self._found_on_a(None))
        if match is None:
            return Replication(plan, NOT_REPLICATED, f"half A's analysis ({halves[0]} datapoints) does not find "
                                                     f"{plan.column} separating failures ({plan.direction})", halves)
        return self._separator_on_b(plan, match, halves)

    def _found_on_a(self, analysed: Optional[frozenset[str]]) -> Findings:
        """The analysis of half A, over the ``analysed`` columns only (None: all) besides what defines failures."""
        if analysed not in self._found:
            names = [name for name in self.table.arrow_types() if analysed is None or name in analysed
                     or name in self.table.roles.get("scores", []) or name in KEPT]
            columns = self.table.arrays(names) | {name: values for name, values in self.run_columns.items()
                                                  if analysed is None or name in analysed}  # in idx order, as in_a
            roles = {role: [name for name in value if name in columns] if isinstance(value, list) else value
                     for role, value in self.table.roles.items()}
            with tempfile.TemporaryDirectory(prefix="lantern-replication-") as folder:
                path = os.path.join(folder, "half_a.parquet")
                write_epoch_table(path, {name: values[self.in_a] for name, values in columns.items()}, roles)
                self._found[analysed] = analyze_table(EpochTable(path), None, self.failure, top=TOP)
        return self._found[analysed]

    def _values(self, names: list[str]) -> dict[str, np.ndarray]:
        """Columns of the table or of the run folder, in idx order."""
        found = {name: self.run_columns[name] for name in names if name in self.run_columns}
        rest = [name for name in names if name not in found]
        return found | (self.table.values(rest) if rest else {})

    def _slice_on_b(self, plan: ReplicationPlan, conditions: list[Condition], halves: tuple[int, int]) -> Replication:
        values = self._values([c.column for c in conditions])
        inside = np.ones(len(self.idx), dtype=bool)
        for condition in conditions:
            inside &= condition.mask(values[condition.column])
        described = " and ".join(c.describe() for c in conditions)
        return self._inside_on_b(plan, inside, halves, f"half A's analysis of its columns finds it as '{described}'",
                                 described)

    def _subgroup(self, plan: ReplicationPlan, halves: tuple[int, int]) -> Replication:
        """Picked again on half A (its datapoints there fail more than the rest of A), then tested on half B."""
        inside = np.isin(self.idx, plan.idx)
        fail_in, size_in = int((inside & self.in_a & self.failed).sum()), int((inside & self.in_a).sum())
        p_value = _more_failures(inside, self.failed, self.in_a)
        if p_value >= LEVEL:
            return Replication(plan, NOT_REPLICATED, f"on half A its {size_in} datapoints ({fail_in} failing) do not "
                                                     f"fail significantly more than the rest of A (p = {p_value:.2g}), "
                                                     "so half A would not pick it", halves)
        return self._inside_on_b(plan, inside, halves, f"on half A its {size_in} datapoints fail more than the rest "
                                                       f"(p = {p_value:.2g})", plan.finding)

    def _inside_on_b(self, plan: ReplicationPlan, inside: np.ndarray, halves: tuple[int, int], found: str,
                     described: str) -> Replication:
        """The verdict of a group of datapoints (``inside``, over the table's rows) on half B: failing more than
        the rest of B, one-sided Fisher exact test."""
        on_b, failed = ~self.in_a, self.failed
        counts = [(int((failed & part & on_b).sum()), int((part & on_b).sum())) for part in (inside, ~inside)]
        p_value = _more_failures(inside, failed, on_b)
        holds = p_value < LEVEL
        reason = (f"{found}; on half B, which took no part in finding it, it "
                  f"{'fails more than the rest' if holds else 'does not fail significantly more than the rest'}")
        return Replication(plan, REPLICATED if holds else NOT_REPLICATED, reason, halves, described, counts[0],
                           counts[1], p_value=p_value)

    def _separator_on_b(self, plan: ReplicationPlan, column: str, halves: tuple[int, int]) -> Replication:
        numbers = self._values([column])[column].astype(np.float64)
        usable = ~self.in_a & np.isfinite(numbers)
        failing, passing = numbers[usable & self.failed], numbers[usable & ~self.failed]
        higher = plan.direction.startswith("higher")
        if not len(failing) or not len(passing):
            return Replication(plan, NOT_REPLICATED, "half B has no failing or no passing datapoint with a value",
                               halves, column)
        test = mannwhitneyu(failing, passing, alternative="greater" if higher else "less")
        auc = float(test.statistic) / (len(failing) * len(passing))
        holds = float(test.pvalue) < LEVEL
        reason = (f"half A's analysis finds {column} separating failures ({plan.direction}); on half B, which took "
                  f"no part in finding it, it {'does too' if holds else 'does not'}")
        return Replication(plan, REPLICATED if holds else NOT_REPLICATED, reason, halves, column,
                           auroc=auc if higher else 1 - auc, p_value=float(test.pvalue))


def _families(plan: ReplicationPlan, found: Findings) -> list[Any]:
    return [getattr(found, family) for family in FAMILIES if plan.family in (None, family)]


def _same_slice(plan: ReplicationPlan, found: Findings) -> Optional[list[Condition]]:
    """The conditions of half A's first slice over the finding's columns and operators (values where '=')."""
    wanted = sorted(_shape(c) for c in plan.conditions)
    for family in _families(plan, found):
        for candidate in family.slices:
            if sorted(_shape(c) for c in candidate.conditions) == wanted:
                return list(candidate.conditions)
    return None


def _shape(condition: Condition) -> tuple[str, str, str]:
    """What must be the same for a slice of A to be the finding: the column, the operator and an '=' value."""
    value = condition.value.item() if isinstance(condition.value, np.generic) else condition.value
    return condition.column, condition.op, repr(value) if condition.op == "=" else ""


def _more_failures(inside: np.ndarray, failed: np.ndarray, half: np.ndarray) -> float:
    """One-sided Fisher exact p-value of ``inside`` failing more than the rest, within ``half``."""
    cells = [[int((failed & part & half).sum()), int((~failed & part & half).sum())] for part in (inside, ~inside)]
    return float(fisher_exact(cells, alternative="greater")[1]) if all(sum(row) for row in cells) else 1.0


def _same_separator(plan: ReplicationPlan, found: Findings) -> Optional[str]:
    """The column half A's separating quantity of the same name and direction stands for (a family: its best unit)."""
    for family in _families(plan, found):
        for candidate in family.separators:
            if candidate.column == plan.column and candidate.direction == plan.direction:
                return candidate.units[0].column if candidate.units else candidate.column
    return None
