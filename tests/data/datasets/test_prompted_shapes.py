"""PromptedShapesDataset and PromptedClipsDataset: the prompt picks the target, meta info says what is planted,
the ground truth matches the datapoints, and limits are refused with the limit named."""

import numpy as np
import pytest
import torch

from data.datasets.planted import PlantedCause
from data.datasets.prompted_clips import MAX_FRAMES, PromptedClipsDataset
from data.datasets.prompted_shapes import PromptedShapesDataset

PLANTED = {"low_contrast": 0.2, "touching": 0.2, "thin": 0.2, "streaked": 0.1}


@pytest.fixture(scope="module")
def scenes():
    dataset = PromptedShapesDataset(120, split="val", **PLANTED)
    return dataset, [dataset[i] for i in range(len(dataset))]


def test_a_datapoint_is_the_same_every_time_and_differs_between_splits():
    first, again = PromptedShapesDataset(5, split="train")[3], PromptedShapesDataset(5, split="train")[3]
    assert torch.equal(first["inputs"]["image"], again["inputs"]["image"])
    assert torch.equal(first["labels"]["mask"], again["labels"]["mask"])
    other = PromptedShapesDataset(5, split="val")[3]
    assert not torch.equal(first["inputs"]["image"], other["inputs"]["image"])


def test_the_prompt_lies_inside_the_target_mask(scenes):
    _, items = scenes
    for item in items:
        mask = item["labels"]["mask"][0]
        x, y = item["inputs"]["point"].tolist()
        assert mask.shape == item["inputs"]["image"].shape[1:]
        assert mask[int(y), int(x)] == 1, item["meta_info"]["idx"]
        assert item["meta_info"]["object_size"] == pytest.approx(float(mask.mean()))


def test_meta_info_follows_the_planted_causes(scenes):
    dataset, items = scenes
    planted = [dataset.planted(i) for i in range(len(dataset))]
    assert [item["meta_info"]["thin_parts"] for item in items] == [p.thin for p in planted]
    assert [item["meta_info"]["touching"] for item in items] == [p.touching for p in planted]
    contrast = np.array([item["meta_info"]["contrast"] for item in items])
    low = np.array([p.low_contrast for p in planted])
    assert contrast[low].max() < contrast[~low].min()  # the planted ones are the least contrasted
    for share in ("low_contrast", "touching", "thin"):  # each cause is planted on about its share
        assert 0.1 <= np.mean([getattr(p, share) for p in planted]) <= 0.32


def _share_of_ring_in_target_colour(item) -> float:
    """The share of the pixels just outside the target whose colour is the target's (up to the noise)."""
    image, mask = item["inputs"]["image"], item["labels"]["mask"][0].bool()
    colour = image[:, mask].median(dim=1).values
    ring = torch.nn.functional.max_pool2d(mask[None, None].float(), 3, 1, 1)[0, 0].bool() & ~mask
    return float(((image[:, ring] - colour[:, None]).abs().max(dim=0).values < 0.6).float().mean())


def test_a_touching_neighbour_has_the_target_colour():
    dataset = PromptedShapesDataset(80, split="val", touching=0.5)
    shares = [(_share_of_ring_in_target_colour(dataset[i]), dataset.planted(i).touching) for i in range(80)]
    assert min(share for share, touching in shares if touching) > 0.01
    assert max(share for share, touching in shares if not touching) < 0.01


def test_planted_causes_are_the_ground_truth(scenes):
    dataset, items = scenes
    causes = {cause.name: cause for cause in dataset.planted_causes()}
    assert set(causes) == {"low_contrast", "touching", "thin", "streaked"}
    assert all(isinstance(cause, PlantedCause) for cause in causes.values())
    assert causes["thin"].idx == {i for i, item in enumerate(items) if item["meta_info"]["thin_parts"]}
    assert causes["touching"].meta_columns == ("touching",) and causes["thin"].meta_columns == ("thin_parts", "shape")
    assert causes["streaked"].meta_columns == () and causes["streaked"].finding == "group"
    assert "streaked" not in items[0]["meta_info"]  # only the inputs show it
    assert PromptedShapesDataset(10).planted_causes() == []


def test_streaks_show_in_the_image():
    dataset = PromptedShapesDataset(60, split="val", streaked=0.5)
    streaked = [i for i in range(60) if dataset.planted(i).streaked]
    clean = PromptedShapesDataset(60, split="val")
    for i in streaked[:3]:  # the same scene with streaks added: a periodic diagonal pattern
        difference = dataset[i]["inputs"]["image"] - clean[i]["inputs"]["image"]
        assert difference.abs().max() > 1.0


@pytest.mark.parametrize("args, message", [
    ({"num_datapoints": 0}, "num_datapoints"), ({"resolution": 8}, "resolution"), ({"split": "dev"}, "split"),
    ({"thin": 1.5}, "thin is a share"),
])
def test_bad_arguments_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        PromptedShapesDataset(**args)


def test_a_clip_follows_its_target_from_the_prompted_frame():
    dataset = PromptedClipsDataset(20, num_frames=5, split="val", crossing=0.5, fast=0.5)
    item = dataset[4]
    frames, masks = item["inputs"]["frames"], item["labels"]["mask"]
    assert frames.shape == (5, 3, 32, 32) and masks.shape == (5, 1, 32, 32)
    x, y = item["inputs"]["point"].tolist()
    assert masks[0, 0, int(y), int(x)] == 1
    centres = [torch.nonzero(m[0]).float().mean(dim=0) for m in masks]
    steps = [float((b - a).norm()) for a, b in zip(centres, centres[1:])]
    assert np.std(steps) < 1.0 and np.mean(steps) > 0.3  # it moves, at a steady pace
    causes = {cause.name: cause for cause in dataset.planted_causes()}
    assert causes["crossing"].idx == {i for i in range(20) if dataset[i]["meta_info"]["crossing"]}
    fast = [dataset[i]["meta_info"]["speed"] for i in causes["fast"].idx]
    slow = [dataset[i]["meta_info"]["speed"] for i in set(range(20)) - causes["fast"].idx]
    assert min(fast) > max(slow)


def test_an_enormous_clip_is_refused_naming_the_limit():
    with pytest.raises(ValueError, match=f"between 2 and {MAX_FRAMES}"):
        PromptedClipsDataset(num_frames=10_000)
