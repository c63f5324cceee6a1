"""SyntheticShapesDataset and collate_datapoints: determinism, contract, errors."""

import pytest
import torch

from data.datasets import SyntheticShapesDataset, collate_datapoints
from utils.errors import DatasetContractError


@pytest.fixture(scope="module")
def dataset() -> SyntheticShapesDataset:
    return SyntheticShapesDataset(num_datapoints=60, resolution=32, seed=0, split="train")


def test_same_index_gives_identical_datapoints_across_instances(dataset):
    other = SyntheticShapesDataset(num_datapoints=60, resolution=32, seed=0, split="train")
    for idx in (0, 7, 59):
        assert torch.equal(dataset[idx]["inputs"]["image"], other[idx]["inputs"]["image"])
        assert dataset[idx]["labels"]["class"] == other[idx]["labels"]["class"]
        assert dataset[idx]["meta_info"] == other[idx]["meta_info"]


def test_datapoint_does_not_depend_on_dataset_length():
    short = SyntheticShapesDataset(num_datapoints=5)
    long = SyntheticShapesDataset(num_datapoints=500)
    assert torch.equal(short[3]["inputs"]["image"], long[3]["inputs"]["image"])


def test_seed_and_split_change_the_images(dataset):
    image = dataset[0]["inputs"]["image"]
    other_seed = SyntheticShapesDataset(num_datapoints=60, seed=1, split="train")
    other_split = SyntheticShapesDataset(num_datapoints=60, seed=0, split="val")
    assert not torch.equal(image, other_seed[0]["inputs"]["image"])
    assert not torch.equal(image, other_split[0]["inputs"]["image"])


def test_set_base_seed_leaves_datapoints_unchanged():
    val = SyntheticShapesDataset(num_datapoints=10, split="val")
    before = val[4]["inputs"]["image"]
    val.set_base_seed(123)
    assert torch.equal(before, val[4]["inputs"]["image"])


def test_datapoint_structure_shapes_and_dtypes(dataset):
    datapoint = dataset[3]
    assert set(datapoint) == {"inputs", "labels", "meta_info"}
    image, label = datapoint["inputs"]["image"], datapoint["labels"]["class"]
    assert image.shape == (3, 32, 32) and image.dtype == torch.float32
    assert label.shape == () and label.dtype == torch.int64
    meta = datapoint["meta_info"]
    assert meta["idx"] == 3 and type(meta["idx"]) is int
    assert meta["class_name"] == SyntheticShapesDataset.CLASS_NAMES[int(label)]
    assert isinstance(meta["scale"], float) and isinstance(meta["noise_std"], float)
    assert isinstance(meta["occluded"], bool) and isinstance(meta["clutter"], int)


def test_images_are_roughly_normalised(dataset):
    images = torch.stack([dataset[i]["inputs"]["image"] for i in range(20)])
    assert abs(images.mean().item()) < 0.1
    assert 0.8 < images.std().item() < 1.2


def test_resolution_is_respected():
    image = SyntheticShapesDataset(num_datapoints=2, resolution=48)[1]["inputs"]["image"]
    assert image.shape == (3, 48, 48)


def test_all_classes_appear_and_difficulty_varies(dataset):
    labels = {int(dataset[i]["labels"]["class"]) for i in range(len(dataset))}
    assert labels == set(range(6))
    metas = [dataset[i]["meta_info"] for i in range(len(dataset))]
    assert any(m["occluded"] for m in metas) and not all(m["occluded"] for m in metas)
    assert len({m["clutter"] for m in metas}) > 1


def test_num_classes_limits_labels():
    binary = SyntheticShapesDataset(num_datapoints=40, num_classes=2)
    assert {int(binary[i]["labels"]["class"]) for i in range(40)} == {0, 1}


def test_out_of_range_index_raises_index_error(dataset):
    with pytest.raises(IndexError, match="out of range"):
        dataset[60]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_datapoints": 0}, "num_datapoints must be at least 1"),
        ({"resolution": 8}, "resolution must be at least 16"),
        ({"split": "dev"}, r"unknown split 'dev'.*'test', 'train', 'val'"),
        ({"num_classes": 1}, "num_classes must be between 2 and"),
        ({"num_classes": 99}, "num_classes must be between 2 and"),
    ],
)
def test_bad_arguments_raise_value_error_with_guidance(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SyntheticShapesDataset(**kwargs)


@pytest.mark.parametrize("batch_size", [1, 5])
def test_collate_stacks_tensors_and_lists_meta(dataset, batch_size):
    batch = collate_datapoints([dataset[i] for i in range(batch_size)])
    assert batch["inputs"]["image"].shape == (batch_size, 3, 32, 32)
    assert batch["labels"]["class"].shape == (batch_size,)
    assert torch.equal(batch["meta_info"]["idx"], torch.arange(batch_size))
    assert batch["meta_info"]["class_name"] == [dataset[i]["meta_info"]["class_name"] for i in range(batch_size)]
    assert len(batch["meta_info"]["occluded"]) == batch_size


def test_collate_recurses_into_nested_dicts():
    datapoints = [
        {"inputs": {"a": {"b": torch.full((2,), i)}}, "labels": {}, "meta_info": {"idx": i}} for i in range(3)
    ]
    batch = collate_datapoints(datapoints)
    assert torch.equal(batch["inputs"]["a"]["b"], torch.tensor([[0, 0], [1, 1], [2, 2]]))


def test_collate_rejects_empty_list():
    with pytest.raises(ValueError, match="at least one datapoint"):
        collate_datapoints([])


def test_collate_turns_plain_number_labels_into_tensors():
    datapoints = [{"inputs": {"x": torch.zeros(2)}, "labels": {"class": i % 2}, "meta_info": {"idx": i}}
                  for i in range(3)]
    assert torch.equal(collate_datapoints(datapoints)["labels"]["class"], torch.tensor([0, 1, 0]))


@pytest.mark.parametrize("labels, named", [({"class": "cat"}, "labels['class'] is a str ('cat')"),
                                           ({"kind": torch.tensor(1)}, "labels has keys ['kind']")])
def test_collate_refuses_a_leaf_that_is_no_tensor_or_different_keys_naming_datapoint_and_key(labels, named):
    good = {"inputs": {"x": torch.zeros(2)}, "labels": {"class": torch.tensor(0)}, "meta_info": {"idx": 0}}
    bad = {"inputs": {"x": torch.zeros(2)}, "labels": labels, "meta_info": {"idx": 7}}
    with pytest.raises(DatasetContractError) as caught:
        collate_datapoints([good, bad])
    assert f"datapoint idx=7: {named}" in str(caught.value)
    assert 'docs/your_project.md "The dataset"' in str(caught.value)
