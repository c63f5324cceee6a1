"""Failure slices: conjunctions of up to three conditions whose datapoints fail more than the rest.

Conditions are ``column = value`` for categorical columns (strings, flags, integers with few values) and
``column < t`` / ``column >= t`` for numbers, ``t`` at the 10/25/50/75/90 % quantiles (rounded to 3
significant digits, the value the description shows). A beam search grows conjunctions one condition at
a time, keeping the best ``beam`` slices per level; a child must score higher than its parent.

Scoring rule (why tiny lucky groups do not win): a slice's score is the one-sided lower confidence bound
of its failure rate (Clopper-Pearson, ``scipy.stats.beta``) minus the failure rate of the rest. The
confidence level is Bonferroni-corrected for every slice the search evaluates (alpha = 0.05 / m), so a
group of 5 with 4 failures scores below a group of 200 with 60% failures. Slices smaller than
``min_size`` are never considered. A longer conjunction must earn its condition: it must score above its
parent, and its lower bound must exceed the failure rate of the parent's datapoints the condition leaves
out. The report is a sequential covering: going down the ranking, a slice is kept only when its datapoints
that no kept slice holds number at least ``min_size`` and their failure rate's lower bound (same level)
exceeds the failure rate of everything outside the kept slices and it; so each group of failures is
reported once, by its best description, and a broad slice that only contains a better one is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.stats import beta

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
MAX_CATEGORIES = 12  # an integer column with at most this many values is treated as categorical
ALPHA = 0.05
SEARCH_ROWS = 100_000  # larger tables are searched on a random sample; reported figures use every row


@dataclass
class Condition:
    column: str
    op: str  # '=', '<' or '>='
    value: object

    def describe(self) -> str:
        value = self.value
        shown = f"{value:.3g}" if isinstance(value, float) else str(value)
        return f"{self.column} {self.op} {shown}"

    def mask(self, values: np.ndarray) -> np.ndarray:
        if self.op == "=":
            return values == self.value
        numbers = values.astype(np.float64)
        with np.errstate(invalid="ignore"):
            return numbers < self.value if self.op == "<" else numbers >= self.value


@dataclass
class Slice:
    conditions: list[Condition]
    size: int
    failures: int
    failure_rate: float
    rest_failure_rate: float
    score: float
    idx: list[int] = field(repr=False)

    @property
    def description(self) -> str:
        return " and ".join(condition.describe() for condition in self.conditions)


def candidate_conditions(columns: dict[str, np.ndarray], min_size: int) -> list[Condition]:
    """Every condition over ``columns`` that holds for at least ``min_size`` rows."""
    conditions = []
    for name, values in columns.items():
        if _is_categorical(values):
            present = values[_present(values)]
            kept, counts = np.unique(present.astype(str) if values.dtype == object else present, return_counts=True)
            conditions += [Condition(name, "=", _plain(v)) for v, c in zip(kept, counts) if c >= min_size]
        else:
            finite = values[np.isfinite(values)]
            if len(finite) == 0:
                continue
            thresholds = sorted({float(f"{t:.3g}") for t in np.quantile(finite, QUANTILES)})
            conditions += [Condition(name, op, t) for t in thresholds for op in ("<", ">=")]
    return conditions


def find_slices(columns: dict[str, np.ndarray], failed: np.ndarray, idx: np.ndarray, min_size: int,
                top: int = 10, beam: int = 12, max_conditions: int = 3, seed: int = 0,
                exclusive: frozenset[str] = frozenset()) -> list[Slice]:
    """The ``top`` slices by score (see the module docstring), best first; only those with a positive score.

    At most one of the ``exclusive`` columns appears in a slice: ``label = a and prediction = b`` is a cell
    of the confusion matrix, which fails by definition.
    """
    conditions = candidate_conditions(columns, min_size)
    if not conditions or failed.all() or not failed.any():
        return []
    search = np.arange(len(failed))
    if len(search) > SEARCH_ROWS:
        search = np.sort(np.random.default_rng(seed).choice(len(failed), SEARCH_ROWS, replace=False))
    masks = np.stack([c.mask(columns[c.column][search]) for c in conditions])
    search_failed = failed[search]
    scale = len(search) / len(failed)
    tested = len(conditions) * (1 + beam * (max_conditions - 1))
    score = _Scorer(search_failed, tested, max(1, int(min_size * scale)))

    level = [((i,), masks[i]) for i in range(len(conditions))]
    scores = np.array([score(m[None])[0] for _, m in level])
    found: dict[tuple[int, ...], float] = {}
    for depth in range(max_conditions):
        order = np.argsort(-scores)[:beam]
        best = [(level[i], scores[i]) for i in order if np.isfinite(scores[i])]
        found.update({members: s for (members, _), s in best})
        if depth == max_conditions - 1:
            break
        level, scores = _extend(best, masks, conditions, score, exclusive)
        if not level:
            break
    ranked = sorted(found.items(), key=lambda item: -item[1])
    return _report(ranked, conditions, columns, failed, idx, top, score.alpha, min_size)


def _extend(best: list, masks: np.ndarray, conditions: list[Condition], score,
            exclusive: frozenset[str]) -> tuple[list, np.ndarray]:
    """Every best slice with one more condition on another column, kept when it beats its parent and its
    lower bound exceeds the failure rate of the parent's datapoints it leaves out (the condition matters)."""
    children, child_scores, seen = [], [], set()
    for (members, mask), parent_score in best:
        used = {conditions[i].column for i in members}
        if used & exclusive:
            used |= exclusive
        combined = masks & mask
        child, lower = score(combined, with_lower=True)
        left_out = _rate(mask & ~combined, score.failed)
        for i in np.flatnonzero((child > parent_score) & (lower > left_out)):
            key = tuple(sorted((*members, int(i))))
            if conditions[i].column in used or key in seen:
                continue
            seen.add(key)
            children.append((key, combined[i]))
            child_scores.append(child[i])
    return children, np.array(child_scores)


def _rate(masks: np.ndarray, failed: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num((masks & failed).sum(axis=1) / masks.sum(axis=1), nan=0.0)


class _Scorer:
    """Score of each row of a (k, n) mask matrix: lower confidence bound inside minus the rest's rate."""

    def __init__(self, failed: np.ndarray, tested: int, min_size: int) -> None:
        self.failed, self.min_size = failed, min_size
        self.total_failures, self.n = int(failed.sum()), len(failed)
        self.alpha = ALPHA / max(tested, 1)

    def __call__(self, masks: np.ndarray, with_lower: bool = False):
        size = masks.sum(axis=1)
        inside = (masks & self.failed).sum(axis=1)
        rest = np.maximum(self.n - size, 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            lower = np.nan_to_num(beta.ppf(self.alpha, inside, size - inside + 1), nan=0.0)
        result = lower - (self.total_failures - inside) / rest
        result[(size < self.min_size) | (size == self.n)] = -np.inf
        return (result, lower) if with_lower else result


def _report(ranked: list, conditions: list[Condition], columns: dict[str, np.ndarray], failed: np.ndarray,
            idx: np.ndarray, top: int, alpha: float, min_size: int) -> list[Slice]:
    """Exact figures on every row for the best slices, each adding failures the better ones do not explain.

    Sequential covering: a slice is kept only when its datapoints outside the slices kept before it are at
    least ``min_size`` and their failure rate's lower bound exceeds the rate of everything outside them all.
    """
    reported: list[Slice] = []
    covered = np.zeros(len(failed), dtype=bool)
    for members, search_score in ranked:
        if search_score <= 0 or len(reported) == top:
            break
        chosen = [conditions[i] for i in members]
        mask = np.logical_and.reduce([c.mask(columns[c.column]) for c in chosen])
        new, outside = mask & ~covered, ~(mask | covered)
        if new.sum() < min_size or not outside.any():
            continue
        new_failures = int((new & failed).sum())
        if beta.ppf(alpha, new_failures, new.sum() - new_failures + 1) <= failed[outside].mean():
            continue
        size, inside = int(mask.sum()), int((mask & failed).sum())
        rest = max(len(failed) - size, 1)
        reported.append(Slice(chosen, size, inside, inside / size, float((failed.sum() - inside) / rest),
                              float(search_score), idx[mask].tolist()))
        covered |= mask
    return reported


def _is_categorical(values: np.ndarray) -> bool:
    if values.dtype == object or values.dtype.kind == "b":
        return True
    return values.dtype.kind in "iu" and len(np.unique(values)) <= MAX_CATEGORIES


def _present(values: np.ndarray) -> np.ndarray:
    return np.array([v is not None for v in values]) if values.dtype == object else np.ones(len(values), bool)


def _plain(value: object) -> object:
    return value.item() if isinstance(value, np.generic) else value
