"""Where a numeric cause starts: a slice's cut searched on the column's own values, not a quantile bin.

The slice search tests a few quantile cuts per column (``analysis/slices.py``): enough to show that a column
matters, at a level that stays honest over many columns. Where it matters is another question: a cause that starts
at ``cable_m = 40`` found as ``cable_m >= 37.9`` (the 75 % quantile) takes in rows that pass, and a conjunction
with a label then fits better than the condition alone. So every numeric condition of a found slice is cut again:
among the rows where the slice's other conditions hold (its context: every row for a slice of one condition), every
boundary between two consecutive distinct values of the column is tried, and the one with the largest
likelihood-ratio statistic (G, the test of "the slice and the rest of its context fail at one rate") wins, among
cuts that leave at least ``min_size`` rows in the slice, some in the rest of the context, and a slice failing more
than that rest. The maximum of G over cuts is the maximum-likelihood change point of a step in the failure rate.
The quantile cut that made the slice significant is among the cuts tried, so the recut slice separates failures at
least as well by G (within the likelihood unit below); whether it is reported is decided as for any slice (the
report's tests).

The cut is written as a person would: the number with the fewest significant digits among the cuts whose G is
within LIKELIHOOD_UNIT of the best (a log-likelihood within 1 of it: the change point's support interval), so
``cable_m >= 40`` rather than ``>= 39.9871`` where the data cannot tell them apart, and ``>= 0.8546`` where it can.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
from scipy.special import xlogy

from analysis.findings import Condition

CUT_OPS = ("<", ">=")
LIKELIHOOD_UNIT = 2.0  # G within this of the best: a log-likelihood within 1, the cut's support interval
MAX_DIGITS = 40  # a double has 17 significant digits; past them, the cut is the upper value itself


def best_cut(values: np.ndarray, failed: np.ndarray, context: np.ndarray, op: str, min_size: int
             ) -> Optional[float]:
    """The cut ``t`` of ``values op t`` with the largest G (module docstring) between the slice and the rest of
    ``context`` (the rows where the slice's other conditions hold: a cut says where failures start among them, as
    the slice search tests a condition against the rows dropping it would add), written as its roundest number
    within a likelihood unit (``_roundest``); None where no cut qualifies."""
    numbers = values[context].astype(np.float64)
    finite = np.isfinite(numbers)
    numbers, failing = numbers[finite], failed[context][finite]
    order = np.argsort(numbers, kind="stable")
    numbers, failing = numbers[order], failing[order]
    fit = _Fit(numbers, failing, op, int(context.sum()), int(failed[context].sum()), min_size)
    below = np.flatnonzero(numbers[1:] > numbers[:-1]) + 1  # each cut: how many sorted values lie under it
    statistic = fit(below)
    if not len(below) or not np.isfinite(statistic).any():
        return None
    best = float(statistic.max())
    near = below[statistic >= best - LIKELIHOOD_UNIT]
    return _roundest(float(numbers[near.min() - 1]), float(numbers[near.max()]), fit, best - LIKELIHOOD_UNIT)


class _Fit:
    """G of the cuts of one column's sorted values, each given by how many values lie under it (-inf where the
    slice would be smaller than ``min_size``, the whole context, or fail no more than the rest)."""

    def __init__(self, numbers: np.ndarray, failing: np.ndarray, op: str, context_size: int, context_failures: int,
                 min_size: int) -> None:
        self.numbers, self.op, self.min_size = numbers, op, min_size
        self.cumulative = np.concatenate([[0], np.cumsum(failing)])
        self.context_size, self.context_failures = context_size, context_failures

    def __call__(self, below: np.ndarray) -> np.ndarray:
        below_failures = self.cumulative[below]
        if self.op == "<":
            size, inside = below, below_failures
        else:
            size, inside = len(self.numbers) - below, self.cumulative[-1] - below_failures
        rest, rest_failures = self.context_size - size, self.context_failures - inside
        usable = (size >= self.min_size) & (rest > 0) & (inside * rest > rest_failures * size)
        return np.where(usable, likelihood_ratio(inside, size, rest_failures, rest), -np.inf)

    def at(self, cuts: np.ndarray) -> np.ndarray:
        """G of cuts given as numbers."""
        return self(np.searchsorted(self.numbers, cuts, side="left"))


def _roundest(low: float, high: float, fit: _Fit, floor: float) -> float:
    """The number with the fewest significant digits in (low, high] whose cut's G reaches ``floor`` (the best
    such at that number of digits): ``cable_m >= 40`` rather than ``>= 39.9871`` when the two fit alike."""
    scale = max(abs(low), abs(high))
    exponent = math.floor(math.log10(scale)) + 1 if scale > 0 else 0
    for _ in range(MAX_DIGITS):
        step = 10.0 ** exponent
        first, last = math.floor(low / step) + 1, math.floor(high / step)
        if first <= last:
            cuts = np.round(np.arange(first, last + 1) * step, max(0, -exponent))
            cuts = cuts[(cuts > low) & (cuts <= high)]
            statistic = fit.at(cuts) if len(cuts) else np.empty(0)
            if len(cuts) and statistic.max() >= floor:
                return float(cuts[int(np.argmax(statistic))])
        exponent -= 1
    return high


def likelihood_ratio(inside: np.ndarray, size: np.ndarray, rest_failures: np.ndarray, rest: np.ndarray
                     ) -> np.ndarray:
    """G: twice the log-likelihood gained by giving the slice and the rest each their own failure rate."""
    def log_likelihood(k: np.ndarray, n: np.ndarray) -> np.ndarray:
        n = np.asarray(n, dtype=np.float64)
        return xlogy(k, k / np.maximum(n, 1)) + xlogy(n - k, (n - k) / np.maximum(n, 1))
    return 2 * (log_likelihood(inside, size) + log_likelihood(rest_failures, rest)
                - log_likelihood(inside + rest_failures, size + rest))


def recut(conditions: list[Condition], columns: dict[str, np.ndarray], failed: np.ndarray, min_size: int
          ) -> list[Condition]:
    """``conditions`` with each numeric cut searched again (``best_cut``), the others fixed; the same conditions
    where no better cut exists."""
    recut_conditions = list(conditions)
    for k, condition in enumerate(conditions):
        if condition.op not in CUT_OPS:
            continue
        others = [c for j, c in enumerate(recut_conditions) if j != k]
        context = np.logical_and.reduce([c.mask(columns[c.column]) for c in others]) if others else \
            np.ones(len(failed), dtype=bool)
        cut = best_cut(columns[condition.column], failed, context, condition.op, min_size)
        if cut is not None:
            recut_conditions[k] = Condition(condition.column, condition.op, cut, list(condition.same_on))
    return recut_conditions
