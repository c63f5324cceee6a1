"""Any group of datapoints described in meta terms: the meta conditions that best match its rows.

An internal finding (a slice on a summary, a separating unit, a cluster of embeddings) says what the model does;
a user acts on the data. So every one is described by the meta condition (or pair of conditions) that best matches
its datapoints, with scores that mean the same for a flag, a category and a number: **coverage** (the share of the
group the condition holds for: "98% have site = C") and **purity** (the share of the condition's datapoints that are
in the group). The best match has the highest F1 (their harmonic mean) among the conditions that describe the group:
coverage at least 50%, at least twice the condition's share of all datapoints, and an enrichment that is significant
(one-sided Fisher exact test, Bonferroni over the conditions and pairs tried). A pair must also earn each of its
conditions: inside either one's datapoints, the group is significantly more frequent where the other holds too (same
test and level); else a distractor column that halves a condition's rows by chance could win on F1 (a group of 15
circles described as ``label_name = circle and night_shift = True``). None: "no meta column describes it".
"""

from __future__ import annotations

from itertools import combinations
from typing import Optional

import numpy as np
from scipy.stats import hypergeom

from analysis.findings import Condition, MetaMatch
from analysis.slices import ALPHA, candidate_conditions

MIN_COVERAGE = 0.5
MIN_LIFT = 2.0
PAIRED = 10  # the best single conditions paired with each other
MIN_GAIN = 0.05  # a pair replaces its best single condition when its F1 is at least this much higher


class MetaVocabulary:
    """The candidate meta conditions of one table with their rows packed, to describe groups quickly."""

    def __init__(self, meta: dict[str, np.ndarray], min_size: int) -> None:
        self.conditions = candidate_conditions(meta, min_size)
        self.rows = len(next(iter(meta.values()))) if meta else 0
        self.bits = np.stack([np.packbits(c.mask(meta[c.column])) for c in self.conditions]) if self.conditions \
            else np.zeros((0, 0), dtype=np.uint8)
        self.sizes = np.bitwise_count(self.bits).sum(axis=1, dtype=np.int64)
        self.alpha = ALPHA / max(len(self.conditions) + PAIRED * (PAIRED - 1) // 2, 1)

    def best_match(self, group: np.ndarray) -> Optional[MetaMatch]:
        """The meta conditions that best describe the rows where ``group`` (a bool mask over the table) holds."""
        size = int(group.sum())
        if not len(self.conditions) or size == 0:
            return None
        packed = np.packbits(group)
        shared = np.bitwise_count(self.bits & packed).sum(axis=1, dtype=np.int64)
        f1 = 2 * shared / (size + self.sizes)
        options = [(float(f1[k]), (int(k),), int(shared[k]), int(self.sizes[k]))
                   for k in np.flatnonzero(self._describes(shared, self.sizes, size))]
        for i, j in combinations(np.argsort(-f1)[:PAIRED].tolist(), 2):
            if self.conditions[i].column == self.conditions[j].column:
                continue
            both = self.bits[i] & self.bits[j]
            pair_size, pair_shared = int(np.bitwise_count(both).sum()), int(np.bitwise_count(both & packed).sum())
            if pair_size and self._describes(np.array([pair_shared]), np.array([pair_size]), size)[0] and all(
                    self._earns(pair_shared, pair_size, int(shared[k]), int(self.sizes[k])) for k in (i, j)):
                options.append((2 * pair_shared / (size + pair_size) - MIN_GAIN, (i, j), pair_shared, pair_size))
        if not options:
            return None
        _, members, shared_rows, condition_rows = max(options, key=lambda option: option[0])
        return MetaMatch([_copy(self.conditions[k]) for k in members], shared_rows / size, shared_rows / condition_rows)

    def _describes(self, shared: np.ndarray, sizes: np.ndarray, size: int) -> np.ndarray:
        """Whether conditions of ``sizes`` rows sharing ``shared`` with a group of ``size`` describe it."""
        coverage = shared / size
        base = sizes / max(self.rows, 1)
        p_value = hypergeom.sf(shared - 1, self.rows, sizes, size)
        return (coverage >= MIN_COVERAGE) & (coverage >= MIN_LIFT * base) & (p_value < self.alpha)

    def _earns(self, pair_shared: int, pair_size: int, shared: int, size: int) -> bool:
        """Whether, inside one condition's ``size`` rows (``shared`` of them in the group), the group is significantly
        more frequent in the ``pair_size`` rows where the other condition holds too (``pair_shared`` in the group)."""
        return bool(hypergeom.sf(pair_shared - 1, size, shared, pair_size) < self.alpha)

    def condition_rows(self, conditions: list[Condition]) -> np.ndarray:
        """The bool mask of the rows where all of ``conditions`` (of this vocabulary) hold."""
        keys = [(c.column, c.op, c.value) for c in self.conditions]
        packed = np.bitwise_and.reduce([self.bits[keys.index((c.column, c.op, c.value))] for c in conditions])
        return np.unpackbits(packed)[:self.rows].astype(bool)


def _copy(condition: Condition) -> Condition:
    return Condition(condition.column, condition.op, condition.value, list(condition.same_on))
