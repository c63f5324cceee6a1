"""Separating quantities: numeric columns whose values differ between failures and passes.

Every numeric column (flags as 0/1) is given a two-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``) between
failures and passes over its finite values, and its AUROC (U over the number of failure-pass pairs, as
``sklearn.metrics.roc_auc_score``), reported as max(auc, 1 - auc) with the direction. Above 100,000 datapoints
both are computed on a random 100,000 (the slice search's sample size): the AUROC's standard error is then
below 0.002.

A family of per-unit columns (``energy.c0`` ... ``energy.c63``) is one quantity: its p-value is its best unit's
times the units tested (Bonferroni within the family), it is listed once, by its best unit's AUROC, with its best
units inside, and it counts once in the correction over the quantities tested: a quantity is listed only when its
p < 0.05 / (quantities tested). So 64 channels of one debugger neither push a meta column down the list nor dilute
its test.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from scipy.stats import mannwhitneyu

from analysis.findings import Separator, UnitScore
from analysis.slices import ALPHA, SEARCH_ROWS

MIN_ROWS = 10
UNITS_SHOWN = 3


def separating_quantities(columns: dict[str, np.ndarray], failed: np.ndarray,
                          families: Optional[dict[str, str]] = None, seed: int = 0) -> tuple[list[Separator], int]:
    """The significant quantities, strongest first, and how many quantities (families count once) were tested."""
    tested: dict[str, list[tuple[float, UnitScore, str, int]]] = {}
    sample = slice(None) if len(failed) <= SEARCH_ROWS else \
        np.sort(np.random.default_rng(seed).choice(len(failed), SEARCH_ROWS, replace=False))
    for name, values in columns.items():
        result = _test(values[sample], failed[sample])
        if result is not None:
            tested.setdefault((families or {}).get(name, name), []).append((result[0], UnitScore(name, result[1]),
                                                                           result[2], result[3]))
    found = []
    for family, members in tested.items():
        p_value = min(1.0, min(p for p, *_ in members) * len(members))
        if p_value >= ALPHA / len(tested):
            continue
        members.sort(key=lambda member: -member[1].auroc)
        _, best, direction, rows = members[0]
        units = [unit for p, unit, *_ in members if p * len(members) < ALPHA / len(tested)][:UNITS_SHOWN] \
            if len(members) > 1 else []
        found.append(Separator(family if len(members) > 1 else best.column, best.auroc, direction, rows, units,
                               len(members)))
    return sorted(found, key=lambda separator: -separator.auroc), len(tested)


def _test(values: np.ndarray, failed: np.ndarray) -> Optional[tuple[float, float, str, int]]:
    """(p-value, max(auc, 1 - auc), direction, rows tested) of one column; None when it cannot be tested."""
    if values.dtype == object:
        return None
    numbers = values.astype(np.float64)
    usable = np.isfinite(numbers)
    labels = failed[usable]
    if usable.sum() < MIN_ROWS or labels.all() or not labels.any() or np.ptp(numbers[usable]) == 0:
        return None
    test = mannwhitneyu(numbers[usable][labels], numbers[usable][~labels])
    auc = float(test.statistic) / (labels.sum() * (~labels).sum())
    return (float(test.pvalue), max(auc, 1 - auc), "higher in failures" if auc >= 0.5 else "lower in failures",
            int(usable.sum()))


def failing_side(values: np.ndarray, direction: str, share: float) -> np.ndarray:
    """The rows with the most failure-like ``share`` of a column's values (its failure side)."""
    numbers = values.astype(np.float64)
    usable = np.isfinite(numbers)
    if not usable.any():
        return usable
    higher = direction.startswith("higher")
    cut = np.quantile(numbers[usable], 1 - share if higher else share)
    with np.errstate(invalid="ignore"):
        return usable & ((numbers >= cut) if higher else (numbers <= cut))
