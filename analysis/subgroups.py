"""Subgroups: groups of datapoints close together in a captured feature space that fail far more than the rest.

A cause that only the inputs show (a scanner artifact, a rare style) has no meta column to slice on, but a trained
network often represents such inputs apart from the others. So every captured space of pooled feature vectors
(``analysis/internals.py``) is clustered with HDBSCAN (scikit-learn), which finds dense groups of any size and
leaves the points between them unassigned: a group of 1% of the datapoints comes out as a cluster of its own, where
k-means with a few clusters would split the space into broad regions. The space is standardised and reduced to its
first 16 principal components; above 20,000 datapoints, a random 20,000 are clustered and every other one joins the
cluster of its nearest clustered neighbour.

A cluster is a subgroup when it fails far more than the rest of its space: significantly (one-sided Fisher exact
test, ``scipy.stats.hypergeom``, at 0.05 over the number of clusters found in all spaces), and by at least 1.5 times
the rest's failure rate even at the one-sided Clopper-Pearson lower bound of its own (``scipy.stats.beta``, same
level): under random failures, a cluster of 19 that happens to fail 11 times is no subgroup. Each is described by the
meta conditions that best match it (``analysis/meta_terms.py``) or "no meta column describes it", with its most
typical failing datapoints (HDBSCAN's strongest members) as examples.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import beta, hypergeom
from sklearn.cluster import HDBSCAN
from sklearn.decomposition import PCA
from sklearn.neighbors import KNeighborsClassifier

from analysis.findings import Subgroup, Target, TrainingLabelGroup
from analysis.internals import CapturedInternals
from analysis.meta_terms import MetaVocabulary
from analysis.slices import ALPHA

DIMENSIONS = 16
CLUSTERED_ROWS = 20_000
MIN_SAMPLES = 5
EXAMPLES = 5
FAR_MORE = 1.5  # a subgroup's failure rate, even at its lower confidence bound, over the rest's
SAME_GROUP = 0.5  # the Jaccard index of two groups' datapoints above which they are one group


def find_subgroups(internals: CapturedInternals, table_idx: np.ndarray, failed: np.ndarray,
                   vocabulary: MetaVocabulary, min_size: int, layers: dict[str, str], notes: list[str],
                   seed: int = 0) -> list[Subgroup]:
    """The subgroups of every captured space, highest failure rate first; ``notes`` gets why a space gives none
    though it has failures (it holds failing datapoints only)."""
    candidates: list[tuple[float, Subgroup]] = []
    for name, (idx, vectors) in internals.vectors.items():
        rows = np.searchsorted(table_idx, idx)
        usable = np.isfinite(vectors).all(axis=1)
        rows, vectors = rows[usable], vectors[usable]
        fails = failed[rows]
        if fails.all() and len(rows):
            notes.append(f"no subgroups in '{name}': they need the outputs of passing datapoints too, and it holds "
                         "failing ones only (keep='failing'?); keep 'all' or the worst k for subgroups")
        if len(rows) < 2 * min_size or fails.all() or not fails.any():
            continue
        labels, strength = _clusters(vectors, min_size, seed)
        for cluster in range(labels.max() + 1):
            member = labels == cluster
            inside, size = int((member & fails).sum()), int(member.sum())
            rest, rest_failures = len(rows) - size, int(fails.sum()) - inside
            p_value = float(hypergeom.sf(inside - 1, len(rows), int(fails.sum()), size))
            group = np.zeros(len(failed), dtype=bool)
            group[rows[member]] = True
            typical = np.flatnonzero(member & fails)
            typical = typical[np.argsort(-strength[typical], kind="stable")][:EXAMPLES]
            candidates.append((p_value, Subgroup(
                name, size, inside, inside / size, rest_failures / max(rest, 1), table_idx[rows[member]],
                vocabulary.best_match(group), table_idx[rows[typical]].tolist(),
                Target(debugger=name, layer=layers.get(name)))))
    level = ALPHA / max(len(candidates), 1)
    kept = [found for p_value, found in candidates if p_value < level and
            beta.ppf(level, found.failures, found.size - found.failures + 1) >= FAR_MORE * found.rest_failure_rate]
    for found in kept:
        found.target.conditions = list(found.meta_match.conditions) if found.meta_match else []
    return sorted(kept, key=lambda found: -found.failure_rate)


def distinct_groups(clusters: list[Subgroup], variants: list[Subgroup],
                    earlier: Sequence[TrainingLabelGroup | Subgroup]) -> list[Subgroup]:
    """The clusters and the variants (``analysis/failure_groups.py``) as one list, highest failure rate first, each
    group once: one whose datapoints are mostly those of a group reported ``earlier`` (the systematic groups), a
    variant or a cluster before it (in this order: the first says more of them) is left out (Jaccard >=
    SAME_GROUP)."""
    kept: list[Subgroup] = []
    seen = [set(group.idx.tolist()) for group in earlier]
    for group in variants + clusters:
        rows = set(group.idx.tolist())
        if all(len(rows & other) < SAME_GROUP * len(rows | other) for other in seen):
            kept.append(group)
            seen.append(rows)
    return sorted(kept, key=lambda found: -found.failure_rate)


def reduced_space(vectors: np.ndarray, seed: int = 0) -> np.ndarray:
    """The vectors standardised and projected on their first DIMENSIONS principal components (fitted on at most
    CLUSTERED_ROWS of them), as float32."""
    spread = vectors.std(axis=0)
    space = (vectors - vectors.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    dimensions = min(DIMENSIONS, space.shape[1], len(space))
    if space.shape[1] <= dimensions:
        return space.astype(np.float32)
    return PCA(dimensions, random_state=seed).fit(_sample(len(space), seed, space)).transform(space).astype(np.float32)


def _sample(rows: int, seed: int, values: np.ndarray | None = None) -> np.ndarray:
    """At most CLUSTERED_ROWS random positions (sorted), or those rows of ``values``."""
    chosen = np.arange(rows) if rows <= CLUSTERED_ROWS else \
        np.sort(np.random.default_rng(seed).choice(rows, CLUSTERED_ROWS, replace=False))
    return chosen if values is None else values[chosen]


def _clusters(vectors: np.ndarray, min_size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """HDBSCAN's cluster of every row (-1: none) and its membership strength, on the standardised, reduced space."""
    reduced = reduced_space(vectors, seed)
    sample = _sample(len(reduced), seed)
    scale = len(sample) / len(reduced)
    clusterer = HDBSCAN(min_cluster_size=max(MIN_SAMPLES, int(min_size * scale)), min_samples=MIN_SAMPLES,
                        copy=True).fit(reduced[sample])
    labels, strength = np.full(len(reduced), -1), np.zeros(len(reduced))
    labels[sample], strength[sample] = clusterer.labels_, clusterer.probabilities_
    if len(sample) < len(reduced):
        others = np.setdiff1d(np.arange(len(reduced)), sample)
        nearest = KNeighborsClassifier(n_neighbors=1).fit(reduced[sample], clusterer.labels_)
        labels[others] = nearest.predict(reduced[others])
    return labels, strength
