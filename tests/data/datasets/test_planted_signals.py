"""PlantedSignalsDataset: each planted cause's ground truth is what it says, and each cause draws on its own."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from data.datasets.planted_signals import SENSORS, PlantedSignalsDataset

PLANTED = {"num_classes": 4, "seed": 3, "systematic": (0, 3), "attenuated_from": 40.0, "label_noise": 0.05,
           "interference_prob": 0.04, "faulty_sensor": "C"}
SIZE = 1500


@pytest.fixture(scope="module")
def train() -> PlantedSignalsDataset:
    return PlantedSignalsDataset(SIZE, split="train", **PLANTED)


@pytest.fixture(scope="module")
def val() -> PlantedSignalsDataset:
    return PlantedSignalsDataset(SIZE, split="val", **PLANTED)


def labels(dataset: PlantedSignalsDataset, idx: list[int]) -> np.ndarray:
    return np.array([int(dataset[i]["labels"]["class"]) for i in idx])


def test_a_datapoint_is_one_channel_with_its_meta_info(val):
    datapoint = val[7]
    assert datapoint["inputs"]["signal"].shape == (1, 128) and datapoint["inputs"]["signal"].dtype == torch.float32
    assert set(datapoint["meta_info"]) == {"idx", "sensor", "cable_m", "operator", "room", "humidity",
                                           "firmware_beta"}
    assert torch.equal(datapoint["inputs"]["signal"], PlantedSignalsDataset(SIZE, split="val", **PLANTED)[7][
        "inputs"]["signal"])


def test_the_systematic_group_is_mislabelled_in_training_only(train, val):
    for dataset, expected in ((train, 3), (val, 0)):
        members = [i for i in range(SIZE) if dataset.planted(i).systematic and not dataset.planted(i).flipped]
        assert len(members) > 0.04 * SIZE
        assert {dataset.true_class(i) for i in members} == {0}
        assert set(labels(dataset, members).tolist()) == {expected}


def test_about_five_percent_of_labels_are_flipped_to_another_class(val):
    flipped = [i for i in range(SIZE) if val.planted(i).flipped and not val.planted(i).systematic]
    assert 0.035 * SIZE <= len(flipped) <= 0.065 * SIZE
    assert all(label != val.true_class(i) for i, label in zip(flipped, labels(val, flipped)))
    kept = [i for i in range(200) if not val.planted(i).flipped]
    assert all(label == val.true_class(i) for i, label in zip(kept, labels(val, kept)))


def test_the_meta_causes_follow_their_columns(val):
    meta = [val[i]["meta_info"] for i in range(SIZE)]
    above = np.array([val.planted(i).above for i in range(SIZE)])
    cable = np.array([m["cable_m"] for m in meta])
    assert np.array_equal(above, cable >= 40.0) and 0.1 < above.mean() < 0.3
    assert {val.true_class(i) for i in np.flatnonzero(above)} == set(range(4))  # every class, past the threshold
    faulty = np.array([val.planted(i).category for i in range(SIZE)])
    assert np.array_equal(faulty, np.array([m["sensor"] for m in meta]) == "C")
    assert {m["sensor"] for m in meta} == set(SENSORS)


def test_the_attenuation_and_the_interference_change_the_signal():
    quiet = PlantedSignalsDataset(400, seed=3, attenuated_from=0.0)
    loud = PlantedSignalsDataset(400, seed=3, interference_prob=1.0)
    plain = PlantedSignalsDataset(400, seed=3)
    idx = range(40)
    power = {name: np.mean([float(d[i]["inputs"]["signal"].pow(2).mean()) for i in idx])
             for name, d in (("quiet", quiet), ("loud", loud), ("plain", plain))}
    assert power["quiet"] < 0.5 * power["plain"] < power["loud"]
    assert [loud[i]["meta_info"] for i in idx] == [plain[i]["meta_info"] for i in idx]  # no column records it


def test_the_variant_is_rare_and_a_cause_leaves_other_datapoints_alone(val):
    variant = np.array([val.planted(i).variant for i in range(SIZE)])
    assert 0.02 < variant.mean() < 0.06
    plain = PlantedSignalsDataset(SIZE, split="val", seed=3, num_classes=4)
    untouched = [i for i in range(60) if val.planted(i) == plain.planted(i)]
    assert untouched and all(torch.equal(val[i]["inputs"]["signal"], plain[i]["inputs"]["signal"])
                             for i in untouched)


@pytest.mark.parametrize("args, match", [({"systematic": (1, 1)}, "two different classes"),
                                         ({"faulty_sensor": "Z"}, "faulty_sensor"),
                                         ({"label_noise": 1.5}, "label_noise"), ({"length": 8}, "length")])
def test_wrong_arguments_are_refused(args, match):
    with pytest.raises(ValueError, match=match):
        PlantedSignalsDataset(10, **args)
