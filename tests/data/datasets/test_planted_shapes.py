"""PlantedShapesDataset's systematic training-label group: red shapes of one class, labelled as another in training
only, and nothing else changed."""

from __future__ import annotations

import numpy as np
import torch

from data.datasets.planted_shapes import PlantedShapesDataset

RED = (2, 3, 0.35)
SIZE = 600


def members(dataset: PlantedShapesDataset) -> list[int]:
    return [i for i in range(SIZE) if dataset.planted(i).systematic]


def test_the_red_group_is_one_class_labelled_as_another_in_training_only():
    train = PlantedShapesDataset(SIZE, split="train", num_classes=5, seed=2, systematic=RED)
    val = PlantedShapesDataset(SIZE, split="val", num_classes=5, seed=2, systematic=RED)
    plain = PlantedShapesDataset(SIZE, split="val", num_classes=5, seed=2)
    for dataset, label in ((train, 3), (val, 2)):
        chosen = members(dataset)
        of_class = sum(int(dataset[i]["labels"]["class"]) == 2 or dataset.planted(i).systematic for i in range(SIZE))
        assert 0.2 < len(chosen) / of_class < 0.5
        assert {int(dataset[i]["labels"]["class"]) for i in chosen} == {label}
    assert all(int(val[i]["labels"]["class"]) == int(plain[i]["labels"]["class"]) for i in range(SIZE))


def test_a_red_shape_differs_in_colour_only():
    val = PlantedShapesDataset(SIZE, split="val", num_classes=5, seed=2, systematic=RED)
    plain = PlantedShapesDataset(SIZE, split="val", num_classes=5, seed=2)
    chosen = members(val)
    assert chosen
    others = [i for i in range(40) if i not in chosen]
    assert all(torch.equal(val[i]["inputs"]["image"], plain[i]["inputs"]["image"]) for i in others)
    red, usual = val[chosen[0]]["inputs"]["image"].numpy(), plain[chosen[0]]["inputs"]["image"].numpy()
    assert not np.array_equal(red, usual)
    assert val[chosen[0]]["meta_info"] == plain[chosen[0]]["meta_info"]
