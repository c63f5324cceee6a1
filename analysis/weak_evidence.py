"""Why no slice is named: the evidence, in numbers, when it is too weak.

"Slices: none" reads as "nothing is wrong", while it may mean "4 failures cannot show anything": all 4 may share one
meta value, in a slice of 82 datapoints (4.9 % fail against 0 % elsewhere), whose one-sided Fisher p-value (0.014)
is far from the level that condition is tested at after the correction over every condition (about 2e-4). So when
a family names no slice, ``why_no_slice`` reports the condition that came closest (the smallest p-value against
its own level, among the conditions that fail more than the rest), its share of the failures, its p-value and
level, and how many failures a slice of its size would need at that level, its rest as it is: "4 failures of 240:
at this level (p < 0.00021) a slice of 82 datapoints needs at least 9; the largest share is site = C, 4 of 4".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import numpy as np
from scipy.stats import hypergeom

from analysis.findings import NoSlice
from analysis.slices import ALPHA, SEARCH_ROWS, candidate_conditions, condition_levels, fails_more


def why_no_slice(columns: dict[str, np.ndarray], failed: np.ndarray, min_size: int,
                 families: Optional[dict[str, str]] = None, alpha: float = ALPHA, max_conditions: int = 3,
                 known: Optional[Callable[[np.ndarray], bool]] = None, seed: int = 0) -> NoSlice:
    """The module docstring's account of a search with no slice (``alpha`` and ``max_conditions`` as the search
    had them); ``known``: whether a condition's rows (a bool mask) are a finding reported elsewhere, never the
    closest. The closest condition is chosen on the slice search's sample of rows (above SEARCH_ROWS) and its
    figures counted on every row."""
    total, failures = len(failed), int(failed.sum())
    conditions = candidate_conditions(columns, min_size, families)
    if failures in (0, total) or not conditions:
        return NoSlice(failures, total)
    levels = condition_levels(conditions, families, max_conditions=max_conditions, alpha=alpha)
    rows = np.arange(total) if total <= SEARCH_ROWS else \
        np.sort(np.random.default_rng(seed).choice(total, SEARCH_ROWS, replace=False))
    sample_failed = failed[rows]
    counts = np.array([_counts(c.mask(columns[c.column][rows]), sample_failed) for c in conditions])
    inside, size = counts[:, 0], counts[:, 1]
    sample_failures, sample_total = int(sample_failed.sum()), len(rows)
    enriched = (size < sample_total) & (inside * (sample_total - size) > (sample_failures - inside) * size)
    if known is not None:
        enriched &= np.array([not known(c.mask(columns[c.column])) for c in conditions])
    if not enriched.any():
        return NoSlice(failures, total)
    p_values = hypergeom.sf(inside - 1, sample_total, sample_failures, size)
    closeness = np.where(enriched, np.log(np.maximum(p_values, 1e-300)) - np.log(levels), np.inf)
    best = int(np.lexsort((-inside, closeness))[0])
    condition = conditions[best]
    k, n = _counts(condition.mask(columns[condition.column]), failed)
    rest_failures, rest = failures - k, total - n
    return NoSlice(failures, total, condition, n, k, rest_failures / max(rest, 1),
                   float(hypergeom.sf(k - 1, total, failures, n)), float(levels[best]),
                   failures_needed(n, rest_failures, rest, float(levels[best])))


def failures_needed(size: int, rest_failures: int, rest: int, level: float) -> Optional[int]:
    """The fewest failures a slice of ``size`` datapoints needs to fail significantly more (one-sided Fisher test at
    ``level``) than a rest of ``rest`` datapoints with ``rest_failures``; None when even all of them would not."""
    candidates = np.arange(size + 1)
    significant = fails_more(candidates, np.full(size + 1, size), np.full(size + 1, rest_failures),
                             np.full(size + 1, rest), level)
    return int(np.argmax(significant)) if significant.any() else None


def _counts(mask: np.ndarray, failed: np.ndarray) -> tuple[int, int]:
    return int((mask & failed).sum()), int(mask.sum())
