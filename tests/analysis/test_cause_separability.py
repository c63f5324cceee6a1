"""The failure-discovery benchmark's measure of how far a planted cause's failures stand apart from the other
failures in a captured space (``own_neighbours``): the ceiling on what any finder that gathers failures by their
neighbours can find there, checked against a brute-force count."""

from __future__ import annotations

import numpy as np

from benchmarks.failure_discovery import OWN_NEIGHBOURS, own_neighbours


def brute_force(vectors: np.ndarray, cause: np.ndarray, failed: np.ndarray) -> float:
    """Every pairwise distance among the failures, each cause failure's nearest others taken by sorting."""
    rows = np.flatnonzero(failed)
    distances = np.linalg.norm(vectors[rows][:, None] - vectors[rows][None], axis=2)
    np.fill_diagonal(distances, np.inf)
    own = cause[rows]
    nearest = np.argsort(distances[own], axis=1)[:, :OWN_NEIGHBOURS]
    return float(own[nearest].mean())


def test_a_cause_whose_failures_sit_apart_has_only_its_own_as_neighbours():
    rng = np.random.default_rng(0)
    vectors = np.concatenate([rng.normal(size=(300, 4)), rng.normal(20.0, 0.1, size=(20, 4))])
    failed = np.zeros(320, dtype=bool)
    failed[:200] = failed[300:] = True
    cause = np.zeros(320, dtype=bool)
    cause[300:] = True
    assert own_neighbours(vectors, cause, failed) == (1.0, 19 / 219)


def test_a_cause_mixed_among_other_failures_is_near_chance_and_passing_rows_do_not_count():
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(900, 6))
    failed = rng.random(900) < 0.5
    cause = failed & (rng.random(900) < 0.15)
    vectors[~failed] *= 0.01  # passing rows packed around the centre: every failure's nearest rows, were they counted
    share, chance = own_neighbours(vectors, cause, failed)
    assert share == brute_force(vectors, cause, failed)
    assert chance == (cause.sum() - 1) / (failed.sum() - 1)
    assert abs(share - chance) < 0.08


def test_rows_without_a_vector_and_a_cause_of_one_failure_are_left_out():
    rng = np.random.default_rng(2)
    vectors = rng.normal(size=(100, 3))
    failed = np.ones(100, dtype=bool)
    cause = np.zeros(100, dtype=bool)
    cause[:12] = True
    vectors[2:] += 50.0 * cause[2:, None]  # the cause's rows 2..11 sit apart; 0 and 1 lose their vectors
    vectors[:2] = np.nan
    assert own_neighbours(vectors, cause, failed) == (1.0, 9 / 97)
    cause[1:] = False
    assert all(np.isnan(own_neighbours(vectors, cause, failed)))
