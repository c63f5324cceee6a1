"""Failure slices: conjunctions of up to three conditions whose datapoints fail more than the rest.

Conditions (``candidate_conditions``) are ``column is null``, ``column = value`` for strings, flags and the
frequent values of whole-number columns, and ``column < t`` / ``column >= t`` for numbers, ``t`` at the
10/25/50/75/90 % quantiles (rounded to 3 significant digits, or of the spread where finer) and, where one value
holds half the rows (a column mostly 0), at the first value above it. A beam search grows
conjunctions one condition at a time, keeping the best ``beam`` slices per level whose rows are not nearly (Jaccard
>= 0.95) those of a better one, so copies of one signal do not fill it; a child must score higher than its parent.
The quantile cuts decide significance; a found slice is reported with its numeric cuts searched again on the
column's values (``analysis/thresholds.py``: where failures start), and with a label condition only where it needs
one (``_label_needed``), then ranked again.

Significance (why random failures give no slice): a slice is a finding only when it fails significantly
more than the rest, by a one-sided Fisher exact test at its share of alpha = 0.05 (weighted Bonferroni,
``condition_weights``: every family of columns gets an equal share, a family of per-unit columns counting as
one column, split among its columns and their conditions, then among the tests the search makes with each
condition). The test is decided from bounds on the hypergeometric tail, with ``scipy.stats.hypergeom`` summing
it only where the bounds straddle the level. Both rates are uncertain, so a slice of 90% of the datapoints
against a lucky rest of 100 rows is not one, nor is a group of 5 that all fail. Ranking (which description
wins): the one-sided Clopper-Pearson lower bound of the slice's failure rate at the same level
(``scipy.stats.beta``) minus the rest's rate, so a group of 200 with 60% failures ranks above a group of 12
that all fail. Slices smaller than ``min_size`` are never considered. A longer conjunction must earn every
condition: it must rank above its parent and fail significantly more (same test and level) than the rows
that dropping any one of its conditions would add, so a noise condition is never appended. The report is a
sequential covering: going down the ranking, a slice is kept only when its datapoints that no kept slice
holds number at least ``min_size``, hold at least half of its failures, and fail significantly more than
everything outside the kept slices and it; so each group of failures is reported once, by its best
description (others naming the same failures become its ``also``), and a broad slice that only contains a
better one is dropped.

Memory (a table of 100k rows and 600 summary columns gives about 5,500 conditions): each condition's rows are
kept packed, 8 a byte, and counted with ``np.bitwise_count`` a chunk of conditions (CHUNK_BYTES) at a time;
a candidate child is only its conditions' indices, and only the beam's members hold their rows. So the search
takes about rows x conditions / 8 bytes, never a bool mask per condition, let alone one per beam member.
"""

from __future__ import annotations

from collections import Counter
from typing import Optional

import numpy as np
from scipy.special import gammaln
from scipy.stats import beta, hypergeom

from analysis.findings import Condition, Slice, missing
from analysis.thresholds import recut

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
MAX_CATEGORIES = 12  # a whole-number column with at most this many values gets no thresholds
ALPHA = 0.05
MAX_OVERLAP = 0.95  # slices sharing this share of their rows (Jaccard) are one slice to the beam
SEARCH_ROWS = 100_000  # larger tables are searched on a random sample; reported figures use every row
CHUNK_BYTES = 2**20  # packed masks counted at once: bounds the search's temporaries


def candidate_conditions(columns: dict[str, np.ndarray], min_size: int,
                         families: Optional[dict[str, str]] = None) -> list[Condition]:
    """Every condition over ``columns`` that holds for at least ``min_size`` rows.

    ``is null`` for missing values (once per family of units whose columns miss the same rows: 64 channels all
    null on the NaN datapoints are one condition, its ``same_on`` naming the others); ``= value`` (the value
    itself, not its text) for strings, flags and the frequent values of whole-number columns (an integer ID with
    many values, or integers stored as floats because some are missing); ``<`` and ``>=`` at the quantiles for
    numbers with more than MAX_CATEGORIES values.
    """
    conditions = []
    null_masks: dict[tuple[str, bytes], Condition] = {}
    for name, values in columns.items():
        absent = missing(values)
        if absent.sum() >= min_size:
            key = ((families or {}).get(name, name), np.packbits(absent).tobytes())
            if key in null_masks:
                null_masks[key].same_on.append(name)
            else:
                null_masks[key] = Condition(name, "is null")
                conditions.append(null_masks[key])
        if values.dtype == object or values.dtype.kind == "b":
            conditions += _equal_conditions(name, values[~absent].tolist(), min_size)
            continue
        numbers = values[np.isfinite(values)]
        if len(numbers) == 0:
            continue
        if values.dtype.kind in "iu" or np.array_equal(numbers, np.round(numbers)):
            conditions += _equal_conditions(name, numbers.astype(np.int64).tolist(), min_size)
            if len(np.unique(numbers)) <= MAX_CATEGORIES:
                continue
        if len(numbers) > SEARCH_ROWS:  # quantiles of a sample: the same cuts once rounded, without a full sort
            numbers = np.random.default_rng(0).choice(numbers, SEARCH_ROWS, replace=False)
        conditions += [Condition(name, op, t) for t in thresholds(numbers.astype(np.float64)) for op in ("<", ">=")]
    return conditions


def condition_weights(conditions: list[Condition], families: Optional[dict[str, str]] = None) -> np.ndarray:
    """Each condition's share of the significance level (weighted Bonferroni; the shares sum to 1): every family of
    columns gets an equal share, split equally among its columns and then among each column's conditions. A family
    of 64 per-unit columns counts once, as one column with many values does, so neither dilutes the others' tests.
    """
    family_of = families or {}
    per_column = Counter(condition.column for condition in conditions)
    columns_per_family = Counter(family_of.get(column, column) for column in per_column)
    share = np.array([1.0 / (columns_per_family[family_of.get(c.column, c.column)] * per_column[c.column])
                      for c in conditions])
    return share / max(len(columns_per_family), 1)


def thresholds(numbers: np.ndarray) -> list[float]:
    """The quantile thresholds, each rounded to 3 significant digits or, where the values lie close together
    relative to their size (Unix times of one day), to 3 significant digits of their spread."""
    cuts = np.quantile(numbers, QUANTILES)
    spread = cuts[-1] - cuts[0] or np.ptp(numbers)
    if spread == 0:
        return [float(cuts[0])]
    rounded = set(_past_mass(numbers))
    for cut in cuts:
        finest = min(_magnitude(cut), _magnitude(spread)) if cut != 0 else _magnitude(spread)
        rounded.add(float(round(float(cut), 2 - finest)))
    return sorted(rounded)


def _past_mass(numbers: np.ndarray) -> list[float]:
    """The first value above one that at least half the rows hold (a column that is mostly 0: every quantile is
    that value, and no quantile cut parts the rest from it), as a cut; none for other columns."""
    values, counts = np.unique(numbers, return_counts=True)
    top = int(np.argmax(counts))
    return [float(values[top + 1])] if 2 * counts[top] >= len(numbers) and top + 1 < len(values) else []


def _magnitude(value: float) -> int:
    return int(np.floor(np.log10(abs(value))))


def _equal_conditions(name: str, present: list, min_size: int) -> list[Condition]:
    """``name = value`` for each value held by at least ``min_size`` rows, most frequent first."""
    counts = Counter(present).most_common()
    return [Condition(name, "=", _plain(value)) for value, count in counts if count >= min_size]


def find_slices(columns: dict[str, np.ndarray], failed: np.ndarray, idx: np.ndarray, min_size: int,
                top: int = 10, beam: int = 12, max_conditions: int = 3, seed: int = 0,
                exclusive: frozenset[str] = frozenset(), families: Optional[dict[str, str]] = None,
                family: str = "meta", alpha: float = ALPHA) -> list[Slice]:
    """The ``top`` significant slices by score (see the module docstring), best first.

    At most one of the ``exclusive`` columns appears in a slice (a label and its copies), and one is kept only where
    the slice needs it (``_label_needed``). ``families`` maps a column to its family of units
    (``condition_weights``); ``family`` names the kind of column searched ('meta' or 'internals'), which the slices
    carry; ``alpha``: the level shared among every test of the search.
    """
    conditions = candidate_conditions(columns, min_size, families)
    if not conditions or failed.all() or not failed.any():
        return []
    search = np.arange(len(failed))
    if len(search) > SEARCH_ROWS:
        search = np.sort(np.random.default_rng(seed).choice(len(failed), SEARCH_ROWS, replace=False))
    bits = _condition_bits(conditions, columns, search)
    search_failed = failed[search]
    scale = len(search) / len(failed)
    levels = condition_levels(conditions, families, beam, max_conditions, alpha)
    score = _Scorer(search_failed, levels, max(1, int(min_size * scale)))

    level = [(i,) for i in range(len(conditions))]
    alone = score.counts(bits)
    scores, significant = score(alone)
    found: dict[tuple[int, ...], float] = {}
    for depth in range(max_conditions):
        chosen = _distinct(level, bits, np.argsort(-scores), scores, beam)
        best = [(level[i], mask, scores[i]) for i, mask in chosen]
        found.update({level[i]: scores[i] for i, _ in chosen if significant[i]})
        if depth == max_conditions - 1:
            break
        level, scores, significant = _extend(best, bits, alone, conditions, score, exclusive)
        if not level:
            break
    searched = columns if len(search) == len(failed) else _Rows(columns, search)
    candidates = _sharpened(found, conditions, levels, searched, search_failed, max(1, int(min_size * scale)),
                            exclusive)
    slices = _report(candidates, columns, failed, idx, top, min_size)
    for found_slice in slices:
        found_slice.family = family
    return slices


def condition_levels(conditions: list[Condition], families: Optional[dict[str, str]] = None, beam: int = 12,
                     max_conditions: int = 3, alpha: float = ALPHA) -> np.ndarray:
    """Each condition's level: its share of ``alpha`` (``condition_weights``) over the tests the search makes with
    it (each child of d conditions: one test against the rest, one against the rows each condition leaves out)."""
    per_condition = 1 + beam * sum(1 + depth for depth in range(2, max_conditions + 1))
    return alpha * condition_weights(conditions, families) / per_condition


class _Rows(dict):
    """The search sample's rows of each column, taken when first asked for."""

    def __init__(self, columns: dict[str, np.ndarray], rows: np.ndarray) -> None:
        super().__init__()
        self.columns, self.rows = columns, rows

    def __missing__(self, name: str) -> np.ndarray:
        self[name] = self.columns[name][self.rows]
        return self[name]


def _sharpened(found: dict[tuple[int, ...], float], conditions: list[Condition], levels: np.ndarray,
               columns: dict[str, np.ndarray], failed: np.ndarray, min_size: int, labels: frozenset[str]
               ) -> list[tuple[list[Condition], float, float]]:
    """Each found slice as it is reported: its numeric cuts searched on the column's values (``recut``), a label
    condition dropped where the slice does not need it, scored again; (conditions, level, score), best first, each
    description once. The level stays that of the strictest condition the search tested."""
    best: dict[str, tuple[list[Condition], float, float]] = {}
    for members, _ in found.items():
        level = float(levels[list(members)].min())
        chosen = recut([conditions[i] for i in members], columns, failed, min_size)
        if not _label_needed(chosen, labels, columns, failed, level):
            chosen = recut([c for c in chosen if c.column not in labels], columns, failed, min_size)
        mask = np.logical_and.reduce([c.mask(columns[c.column]) for c in chosen])
        inside, size = int((mask & failed).sum()), int(mask.sum())
        if size < min_size or size == len(failed):
            continue
        rank = float(slice_score(inside, size, int(failed.sum()) - inside, len(failed) - size, level))
        key = " and ".join(sorted(c.describe() for c in chosen))
        if key not in best or best[key][2] < rank:
            best[key] = (chosen, level, rank)
    return sorted(best.values(), key=lambda candidate: -candidate[2])


def _label_needed(chosen: list[Condition], labels: frozenset[str], columns: dict[str, np.ndarray],
                  failed: np.ndarray, level: float) -> bool:
    """Whether a slice's label condition belongs to it: the label's datapoints in the slice fail significantly more
    than the slice's others, and the slice without the label does not hold for the other labels (their datapoints
    in it fail no more than theirs outside it; both one-sided Fisher tests at the slice's level). Where it holds
    for other labels too, the slice without the label is the cause, and the label only its worst part."""
    label_part = [c for c in chosen if c.column in labels]
    rest_part = [c for c in chosen if c.column not in labels]
    if not label_part or not rest_part:
        return True
    label = np.logical_and.reduce([c.mask(columns[c.column]) for c in label_part])
    rest = np.logical_and.reduce([c.mask(columns[c.column]) for c in rest_part])
    worse_with_label = fails_more(*_counts(rest & label, failed), *_counts(rest & ~label, failed), level)
    holds_elsewhere = fails_more(*_counts(rest & ~label, failed), *_counts(~rest & ~label, failed), level)
    return bool(worse_with_label) and not bool(holds_elsewhere)


def slice_score(inside: np.ndarray, size: np.ndarray, rest_failures: np.ndarray, rest: np.ndarray,
                level: np.ndarray) -> np.ndarray:
    """The ranking score: the one-sided Clopper-Pearson lower bound of the slice's failure rate at ``level`` minus
    the rest's rate."""
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.nan_to_num(beta.ppf(level, inside, np.asarray(size) - inside + 1), nan=0.0)
    return lower - np.asarray(rest_failures) / np.maximum(rest, 1)


def _condition_bits(conditions: list[Condition], columns: dict[str, np.ndarray], search: np.ndarray) -> np.ndarray:
    """Each condition's packed mask over the ``search`` rows, filled one at a time: a stack of bool masks would
    take rows x conditions bytes."""
    bits = np.empty((len(conditions), -(-len(search) // 64)), dtype=np.uint64)
    for k, condition in enumerate(conditions):
        bits[k] = _pack(condition.mask(columns[condition.column][search]))
    return bits


def _pack(mask: np.ndarray) -> np.ndarray:
    """A bool mask as 64-bit words, 8 rows a byte (the padding bits 0): the search keeps one per condition, so a
    table of 100k rows and 5,500 conditions takes 66 MB rather than 525 MB."""
    packed = np.zeros(-(-len(mask) // 64), dtype=np.uint64)
    packed.view(np.uint8)[:(len(mask) + 7) // 8] = np.packbits(mask)
    return packed


def _and(bits: np.ndarray, members: tuple[int, ...]) -> np.ndarray:
    """The packed rows of a conjunction: the AND of its conditions' rows."""
    return np.bitwise_and.reduce(bits[list(members)], axis=0)


def _ones(packed: np.ndarray) -> int:
    """How many rows a packed mask holds."""
    return int(np.bitwise_count(packed).sum())


def _distinct(level: list[tuple[int, ...]], bits: np.ndarray, order: np.ndarray, scores: np.ndarray,
              beam: int) -> list[tuple[int, np.ndarray]]:
    """The first ``beam`` of ``order`` with a finite score whose rows are not nearly those of one before
    (Jaccard >= MAX_OVERLAP), with their packed rows: 69 summaries that are all NaN on the same rows would fill
    the beam otherwise. Only these keep their rows; the other candidates are their conditions' indices."""
    chosen: list[tuple[int, np.ndarray]] = []
    for i in order:
        if len(chosen) == beam or not np.isfinite(scores[i]):
            break
        mask = _and(bits, level[i])
        if all(_ones(mask & other) < MAX_OVERLAP * _ones(mask | other) for _, other in chosen):
            chosen.append((int(i), mask))
    return chosen


def _extend(best: list, bits: np.ndarray, alone: tuple[np.ndarray, np.ndarray], conditions: list[Condition],
            score: _Scorer, exclusive: frozenset[str]) -> tuple[list, np.ndarray, np.ndarray]:
    """Every best slice with one more condition on another column, kept when it beats its parent and every
    condition matters: the child fails significantly more than the rows that dropping any one of its
    conditions would add (so ``site = C and noise < 1.3`` never replaces ``site = C``).

    Those rows are counted, not built: the child lies inside its parent, and inside the slice without the
    dropped condition (``alone``: each condition's own counts, for a parent of one condition), so each count
    is the wider slice's minus the child's.
    """
    children, child_scores, child_significant, seen = [], [], [], set()
    for members, mask, parent_score in best:
        used = {conditions[i].column for i in members}
        if used & exclusive:
            used |= exclusive
        counts = score.counts(bits, mask)  # the children's failures and sizes, for every test below
        child, significant = score(counts)
        keep = (child > parent_score) & score.fails_more(counts, score.counts(mask[None]))
        for dropped in members:
            others = tuple(j for j in members if j != dropped)
            keep &= score.fails_more(counts, score.counts(bits, _and(bits, others)) if others else alone)
        for i in np.flatnonzero(keep):
            key = tuple(sorted((*members, int(i))))
            if conditions[i].column in used or key in seen:
                continue
            seen.add(key)
            children.append(key)
            child_scores.append(child[i])
            child_significant.append(significant[i])
    return children, np.array(child_scores), np.array(child_significant, dtype=bool)


class _Scorer:
    """The ranking score of each row of a (k, words) packed mask matrix, and whether it fails significantly more
    than the rest (one-sided Fisher exact test at each condition's share of the level, ``alpha``: the level of a
    child is that of the condition it adds)."""

    def __init__(self, failed: np.ndarray, alpha: np.ndarray, min_size: int) -> None:
        self.failed, self.min_size = _pack(failed), min_size
        self.total_failures, self.n = int(failed.sum()), len(failed)
        self.alpha = alpha

    def counts(self, bits: np.ndarray, within: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(failures, size) of each row of ``bits`` (inside the packed mask ``within``), counted CHUNK_BYTES of
        rows at a time: the temporaries stay that small whatever the table's rows and conditions."""
        failures, size = np.empty(len(bits), dtype=np.int64), np.empty(len(bits), dtype=np.int64)
        step = max(1, CHUNK_BYTES // max(bits[0].nbytes, 1))
        for start in range(0, len(bits), step):
            chunk = bits[start:start + step] if within is None else bits[start:start + step] & within
            size[start:start + step] = np.bitwise_count(chunk).sum(axis=1, dtype=np.int64)
            failures[start:start + step] = np.bitwise_count(chunk & self.failed).sum(axis=1, dtype=np.int64)
        return failures, size

    def __call__(self, counts: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The score of each slice of ``counts`` (from ``counts``), and whether it is significant."""
        inside, size = counts
        rest_failures, rest = self.total_failures - inside, self.n - size
        score = slice_score(inside, size, rest_failures, rest, self.alpha)
        score[(size < self.min_size) | (size == self.n)] = -np.inf
        return score, np.isfinite(score) & fails_more(inside, size, rest_failures, rest, self.alpha)

    def fails_more(self, counts: tuple[np.ndarray, np.ndarray], wider: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """Whether each slice of ``counts`` fails significantly more than the rows its ``wider`` slice (counts
        of a slice holding it) adds to it."""
        return fails_more(*counts, wider[0] - counts[0], wider[1] - counts[1], self.alpha)


def _counts(mask: np.ndarray, failed: np.ndarray) -> tuple[np.int64, np.int64]:
    """(failures, size) of a bool mask."""
    return (mask & failed).sum(), mask.sum()


def fails_more(failures: np.ndarray, size: np.ndarray, other_failures: np.ndarray, other_size: np.ndarray,
               alpha: float) -> np.ndarray:
    """One-sided Fisher exact test (``scipy.stats.hypergeom``) that a group fails more than another, disjoint
    one: p < ``alpha``. Never true against an empty group."""
    k, n, rest_k, rest_n = (np.asarray(a, dtype=np.float64) for a in
                            np.broadcast_arrays(failures, size, other_failures, other_size))
    alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), k.shape)
    population, failing = n + rest_n, k + rest_k
    result = np.zeros(k.shape, dtype=bool)
    # a group failing no more often than the other has p >= ~0.5; for the others, the p-value (the tail of the
    # hypergeometric from k up) lies between pmf(k) and pmf(k) / (1 - r), r the ratio pmf(k + 1) / pmf(k) (the
    # terms shrink faster past k): only groups whose bounds straddle alpha need the exact sum (scipy's is slow)
    worse = k * np.maximum(rest_n, 1) > rest_k * np.maximum(n, 1)
    if not worse.any():
        return result
    k, n, population, failing, alpha = k[worse], n[worse], population[worse], failing[worse], alpha[worse]
    log_pmf = (_log_choose(failing, k) + _log_choose(population - failing, n - k) - _log_choose(population, n))
    ratio = (failing - k) * (n - k) / ((k + 1) * (population - failing - n + k + 1))
    with np.errstate(divide="ignore"):
        upper = log_pmf - np.log1p(-np.minimum(ratio, 1.0))
    decided = np.where(upper < np.log(alpha), True, False)
    unsure = (log_pmf < np.log(alpha)) & ~decided
    if unsure.any():
        p_value = hypergeom.sf(k[unsure] - 1, population[unsure], failing[unsure], n[unsure])
        decided[unsure] = np.nan_to_num(p_value, nan=1.0) < alpha[unsure]
    result[worse] = decided
    return result


def _log_choose(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def _report(candidates: list[tuple[list[Condition], float, float]], columns: dict[str, np.ndarray],
            failed: np.ndarray, idx: np.ndarray, top: int, min_size: int) -> list[Slice]:
    """Exact figures on every row for the best slices, each adding failures the better ones do not explain.

    Sequential covering: a slice is kept only when its datapoints outside the slices kept before it are at
    least ``min_size``, hold at least half of its failures, and fail significantly more than everything outside
    them all (at the level of its strictest condition): on a million rows, a slice that adds a sliver of new
    failures to one already kept is the same group in other words, however significant the sliver. A slice left
    out that names the same failures as a kept one in other words (half its
    failures shared both ways, no column in common) is kept as that slice's ``also``: one group, one entry.
    """
    reported: list[Slice] = []
    kept_failures: list[np.ndarray] = []
    covered = np.zeros(len(failed), dtype=bool)
    for chosen, level, search_score in candidates:
        if len(reported) == top:
            break
        mask = np.logical_and.reduce([c.mask(columns[c.column]) for c in chosen])
        new, outside = mask & ~covered, ~(mask | covered)
        mostly_new = 2 * int((new & failed).sum()) >= int((mask & failed).sum())
        if new.sum() < min_size or not mostly_new or not outside.any() or \
                not fails_more(*_counts(new, failed), *_counts(outside, failed), level):
            _fold_restatement(chosen, mask & failed, reported, kept_failures)
            continue
        size, inside = int(mask.sum()), int((mask & failed).sum())
        rest = max(len(failed) - size, 1)
        reported.append(Slice(chosen, size, inside, inside / size, float((failed.sum() - inside) / rest),
                              float(search_score), idx[mask]))
        kept_failures.append(mask & failed)
        covered |= mask
    return reported


def _fold_restatement(chosen: list[Condition], failing: np.ndarray, reported: list[Slice],
                      kept_failures: list[np.ndarray], most: int = 3) -> None:
    """Note ``chosen`` as another description of the kept slice whose failures it shares (at least half of each
    one's), when it uses none of that slice's columns: a sub-slice is not a restatement."""
    failures = int(failing.sum())
    for kept, kept_failing in zip(reported, kept_failures):
        shared = int((failing & kept_failing).sum())
        disjoint = not {c.column for c in chosen} & {c.column for c in kept.conditions}
        if disjoint and 2 * shared >= failures and 2 * shared >= kept.failures and len(kept.also) < most:
            description = " and ".join(condition.describe() for condition in chosen)
            if description not in kept.also:
                kept.also.append(description)
            return


def _plain(value: object) -> object:
    return value.item() if isinstance(value, np.generic) else value
