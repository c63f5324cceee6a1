"""Spikes of a training curve: the planted ones are found, and a noisy falling loss, a plateau or NaN steps
give none."""

from __future__ import annotations

import numpy as np

from analysis.training_spikes import WINDOW, spikes


def falling_loss(steps: int = 600, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return 2.0 * np.exp(-np.arange(steps) / 200) + 0.3 + rng.normal(0, 0.03, steps)


def test_planted_spikes_are_found_and_nothing_else():
    loss = falling_loss()
    planted = [80, 233, 234, 500]
    loss[planted] *= 3
    assert np.flatnonzero(spikes(loss)).tolist() == planted


def test_a_noisy_falling_loss_or_a_flat_one_has_no_spike():
    assert not spikes(falling_loss(seed=1)).any()
    assert not spikes(np.full(300, 0.25) + np.random.default_rng(2).normal(0, 1e-7, 300)).any()


def test_non_finite_losses_are_no_spikes_and_do_not_hide_a_later_one():
    loss = falling_loss()
    loss[100:110] = np.nan
    loss[111] = np.inf
    loss[150] *= 4
    assert np.flatnonzero(spikes(loss)).tolist() == [150]


def test_the_first_window_is_never_a_spike_and_a_short_curve_has_none():
    loss = falling_loss()
    loss[WINDOW - 1] *= 10
    assert not spikes(loss)[:WINDOW].any()
    assert not spikes(loss[:WINDOW]).any()
