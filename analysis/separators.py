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

Near-duplicate quantities are one finding: a listed quantity whose rank correlation with a stronger listed one
reaches TWIN_RHO in absolute value (Spearman: each column ranked once on a sample of rows, the ranks correlated where
both have a value) is nearly a monotone function of it (the width of a digit and its aspect ratio when every digit is
8 high): it is named as that one's twin, not listed again.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from scipy.stats import mannwhitneyu, rankdata

from analysis.findings import Separator, Twin, UnitScore
from analysis.slices import ALPHA, SEARCH_ROWS

MIN_ROWS = 10
UNITS_SHOWN = 3
TWIN_RHO = 0.9
TWIN_ROWS = 5000


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
    found.sort(key=lambda separator: -separator.auroc)
    return merge_twins(found, columns, seed), len(tested)


def merge_twins(found: list[Separator], columns: dict[str, np.ndarray], seed: int = 0) -> list[Separator]:
    """``found`` (strongest first) with each quantity that is a near-duplicate of a stronger kept one (module
    docstring) moved into that one's ``twins``."""
    rows = len(next(iter(columns.values()))) if columns else 0
    sample = np.arange(rows) if rows <= TWIN_ROWS else \
        np.sort(np.random.default_rng(seed).choice(rows, TWIN_ROWS, replace=False))
    ranks = {s.column: _ranks(columns[s.units[0].column if s.units else s.column][sample]) for s in found}
    kept: list[Separator] = []
    for separator in found:
        for other in kept:
            rho = rank_correlation(ranks[other.column], ranks[separator.column])
            if abs(rho) >= TWIN_RHO:
                other.twins.append(Twin(separator.column, round(rho, 3)))
                break
        else:
            kept.append(separator)
    return kept


def _ranks(values: np.ndarray) -> np.ndarray:
    """The ranks of a column's values (ties sharing their mean rank; NaN where there is no value), computed once
    per column rather than once per pair."""
    return rankdata(values.astype(np.float64), nan_policy="omit")


def rank_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho of two columns given as ranks (``_ranks``): Pearson's correlation of the ranks over the rows
    where both have a value (each column ranked over all of its values)."""
    both = np.isfinite(a) & np.isfinite(b)
    if both.sum() < MIN_ROWS:
        return 0.0
    x, y = a[both] - a[both].mean(), b[both] - b[both].mean()
    spread = float(np.sqrt((x * x).sum() * (y * y).sum()))
    return float((x * y).sum()) / spread if spread > 0 else 0.0


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
