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
least as well by G; whether it is reported is decided as for any slice (the report's tests).

The cut is shown as the shortest decimal between the two values it falls between (``cable_m >= 40`` rather than
``>= 39.9871``): the same rows, said the way a person would.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
from scipy.special import xlogy

from analysis.findings import Condition

CUT_OPS = ("<", ">=")
MAX_DIGITS = 40  # a double has 17 significant digits; past them, the cut is the upper value itself


def best_cut(values: np.ndarray, failed: np.ndarray, context: np.ndarray, op: str, min_size: int
             ) -> Optional[float]:
    """The cut ``t`` of ``values op t`` with the largest G (module docstring) between the slice and the rest of
    ``context`` (the rows where the slice's other conditions hold: a cut says where failures start among them, as
    the slice search tests a condition against the rows dropping it would add); None where no cut qualifies."""
    numbers = values[context].astype(np.float64)
    finite = np.isfinite(numbers)
    numbers, failing = numbers[finite], failed[context][finite]
    order = np.argsort(numbers, kind="stable")
    numbers, failing = numbers[order], failing[order]
    bounds = np.flatnonzero(numbers[1:] > numbers[:-1])  # a cut after each: rows [0, b] below, the rest above
    if not len(bounds):
        return None
    below_size, below_failures = bounds + 1, np.cumsum(failing)[bounds]
    if op == "<":
        size, inside = below_size, below_failures
    else:
        size, inside = len(numbers) - below_size, int(failing.sum()) - below_failures
    rest, rest_failures = int(context.sum()) - size, int(failed[context].sum()) - inside
    usable = (size >= min_size) & (rest > 0) & (inside * rest > rest_failures * size)
    if not usable.any():
        return None
    statistic = np.where(usable, likelihood_ratio(inside, size, rest_failures, rest), -np.inf)
    best = int(bounds[int(np.argmax(statistic))])
    return shortest_between(float(numbers[best]), float(numbers[best + 1]))


def likelihood_ratio(inside: np.ndarray, size: np.ndarray, rest_failures: np.ndarray, rest: np.ndarray
                     ) -> np.ndarray:
    """G: twice the log-likelihood gained by giving the slice and the rest each their own failure rate."""
    def log_likelihood(k: np.ndarray, n: np.ndarray) -> np.ndarray:
        n = np.asarray(n, dtype=np.float64)
        return xlogy(k, k / np.maximum(n, 1)) + xlogy(n - k, (n - k) / np.maximum(n, 1))
    return 2 * (log_likelihood(inside, size) + log_likelihood(rest_failures, rest)
                - log_likelihood(inside + rest_failures, size + rest))


def shortest_between(low: float, high: float) -> float:
    """The number with the fewest significant digits in (low, high]: a cut that keeps ``low`` on one side and
    ``high`` on the other, as a person would write it."""
    scale = max(abs(low), abs(high))
    exponent = math.floor(math.log10(scale)) + 1 if scale > 0 else 0
    for _ in range(MAX_DIGITS):
        candidate = round((math.floor(low / 10.0 ** exponent) + 1) * 10.0 ** exponent, max(0, -exponent))
        if low < candidate <= high:
            return float(candidate)
        exponent -= 1
    return high


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
