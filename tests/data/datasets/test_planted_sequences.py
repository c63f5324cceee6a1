"""PlantedSequencesDataset: padded token sequences whose planted causes' ground truth is what it says."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from data.datasets.collate import collate_datapoints
from data.datasets.planted_sequences import (
    FIRST_KEYWORD,
    MAX_LENGTH,
    PER_CLASS,
    SOURCES,
    TRUNCATED_LENGTH,
    PlantedSequencesDataset,
)
from models.attention_classifier import PAD

PLANTED = {"num_classes": 4, "seed": 4, "systematic": (1, 2), "garbled_from": 0.38, "label_noise": 0.05,
           "variant_prob": 0.04, "truncated_channel": "sms"}
SIZE = 1500
VARIANT_KEYWORDS = FIRST_KEYWORD + PER_CLASS * len(PlantedSequencesDataset.CLASS_NAMES)


@pytest.fixture(scope="module")
def train() -> PlantedSequencesDataset:
    return PlantedSequencesDataset(SIZE, split="train", **PLANTED)


@pytest.fixture(scope="module")
def val() -> PlantedSequencesDataset:
    return PlantedSequencesDataset(SIZE, split="val", **PLANTED)


def labels(dataset: PlantedSequencesDataset, idx: list[int]) -> np.ndarray:
    return np.array([int(dataset[i]["labels"]["class"]) for i in idx])


def tokens(dataset: PlantedSequencesDataset, idx: int) -> np.ndarray:
    """The real tokens of one datapoint."""
    return dataset[idx]["inputs"]["tokens"].numpy()[dataset[idx]["inputs"]["attention_mask"].numpy() == 1]


def test_sequences_vary_in_length_and_are_padded_after_their_tokens(val):
    batch = collate_datapoints([val[i] for i in range(64)])
    padded, mask = batch["inputs"]["tokens"], batch["inputs"]["attention_mask"]
    assert padded.shape == (64, MAX_LENGTH) and padded.dtype == torch.int64
    assert torch.equal(mask.bool(), padded != PAD)
    lengths = mask.sum(dim=1)
    assert len(set(lengths.tolist())) > 10
    assert all(bool(mask[row, :n].all()) and not bool(mask[row, n:].any()) for row, n in enumerate(lengths))
    assert int(padded.max()) < PlantedSequencesDataset.VOCAB_SIZE


def test_the_systematic_group_is_the_legacy_source_of_one_topic_mislabelled_in_training_only(train, val):
    for dataset, expected in ((train, 2), (val, 1)):
        members = [i for i in range(SIZE) if dataset.planted(i).systematic and not dataset.planted(i).flipped]
        assert len(members) > 0.04 * SIZE
        assert {dataset[i]["meta_info"]["source"] for i in members} == {"legacy"}
        assert {dataset.true_class(i) for i in members} == {1}
        assert set(labels(dataset, members).tolist()) == {expected}
        assert all(tokens(dataset, i)[0] == 1 + SOURCES.index("legacy") for i in members)


def test_about_five_percent_of_labels_are_flipped_to_another_topic(val):
    flipped = [i for i in range(SIZE) if val.planted(i).flipped and not val.planted(i).systematic]
    assert 0.035 * SIZE <= len(flipped) <= 0.065 * SIZE
    assert all(label != val.true_class(i) for i, label in zip(flipped, labels(val, flipped)))


def test_the_meta_causes_follow_their_columns(val):
    meta = [val[i]["meta_info"] for i in range(SIZE)]
    above = np.array([val.planted(i).above for i in range(SIZE)])
    assert np.array_equal(above, np.array([m["wer"] for m in meta]) >= 0.38) and 0.1 < above.mean() < 0.4
    assert {val.true_class(i) for i in np.flatnonzero(above)} == set(range(4))
    truncated = [i for i in range(SIZE) if val.planted(i).category]
    assert all(val[i]["meta_info"]["channel"] == "sms" for i in truncated)
    assert max(len(tokens(val, i)) for i in truncated) == 1 + TRUNCATED_LENGTH


def test_the_variant_spells_every_keyword_its_own_way_and_no_column_records_it(val):
    variant = [i for i in range(SIZE) if val.planted(i).variant]
    assert 0.02 * SIZE < len(variant) < 0.06 * SIZE
    plain = PlantedSequencesDataset(SIZE, split="val", seed=4, num_classes=4)
    whole = [i for i in variant if not val.planted(i).category and not val.planted(i).above]  # keywords all there
    for i in whole[:20]:
        own, topic = tokens(val, i), val.true_class(i)
        assert keywords(own, VARIANT_KEYWORDS, topic) >= 3 and keywords(own, FIRST_KEYWORD, topic) == 0
    assert all(val[i]["meta_info"] == plain[i]["meta_info"] for i in variant)


def keywords(own: np.ndarray, first: int, topic: int) -> int:
    """How many of ``own`` tokens are the topic's keywords in the spelling whose ids start at ``first``."""
    start = first + PER_CLASS * topic
    return int(((own >= start) & (own < start + PER_CLASS)).sum())


@pytest.mark.parametrize("args, match", [({"systematic": (0, 9)}, "two different classes"),
                                         ({"truncated_channel": "fax"}, "truncated_channel"),
                                         ({"variant_prob": -0.1}, "variant_prob")])
def test_wrong_arguments_are_refused(args, match):
    with pytest.raises(ValueError, match=match):
        PlantedSequencesDataset(10, **args)
