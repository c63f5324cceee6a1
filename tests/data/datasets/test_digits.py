"""DigitsDataset: a fixed split of scikit-learn's digits, and meta info that says what the pixels show."""

from __future__ import annotations

import numpy as np
import pytest

from data.datasets.digits import DigitsDataset, digit_meta


def test_the_split_is_fixed_by_the_seed_and_disjoint():
    train, val = DigitsDataset("train"), DigitsDataset("val")
    assert len(train) + len(val) == 1797 and len(val) == 599
    assert not set(train.rows) & set(val.rows)
    assert np.array_equal(DigitsDataset("val").rows, val.rows)
    assert not np.array_equal(DigitsDataset("val", seed=1).rows, val.rows)
    assert len(DigitsDataset("train", train_limit=150)) == 150


def test_a_datapoint_is_an_upsampled_standardised_image_with_its_meta_info():
    datapoint = DigitsDataset("val")[3]
    assert datapoint["inputs"]["image"].shape == (1, 16, 16)
    assert set(datapoint["meta_info"]) == {"idx", "ink", "area", "thickness", "width", "height", "aspect", "slant",
                                           "centroid_x", "centroid_y"}
    assert 0 <= int(datapoint["labels"]["class"]) <= 9


def test_the_meta_info_of_a_drawn_stroke():
    upright = np.zeros((8, 8))
    upright[1:7, 3:5] = 16  # a vertical bar, 2 pixels thick, 6 high
    meta = digit_meta(upright)
    assert meta["ink"] == 12 and meta["area"] == 12 and meta["thickness"] == 2
    assert (meta["width"], meta["height"], meta["aspect"]) == (2, 6, pytest.approx(1 / 3, abs=1e-3))
    assert meta["slant"] == 0 and (meta["centroid_x"], meta["centroid_y"]) == (3.5, 3.5)
    leaning = np.zeros((8, 8))
    for row in range(8):
        leaning[row, 7 - row] = 16  # the top further right: leaning right
    assert digit_meta(leaning)["slant"] > 0.9 and digit_meta(leaning)["thickness"] == 1
