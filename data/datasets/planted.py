"""Ground truth of causes of failure planted in a synthetic dataset on purpose.

A benchmark of the failure analysis asks a dataset which datapoints carry which planted cause and which meta
columns describe it, and checks that the analysis names them. ``PlantedCause`` is that answer, one per cause;
a dataset with planted causes offers them as ``dataset.planted_causes()``. ``Marks`` is the answer per datapoint
of the datasets that plant the same five kinds of cause (``planted_signals``, ``planted_sequences``), with the
labelling and the argument checks they share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from data.datasets.synthetic_shapes import SPLIT_CODES


@dataclass(frozen=True)
class PlantedCause:
    """One planted cause and the datapoints that carry it.

    ``meta_columns`` are the epoch table's meta columns that describe the cause (a finding naming one of them
    names the cause); empty when only the inputs show it (an analysis can then find it only as a group of
    datapoints). ``finding`` is the kind of finding expected: ``'slice'`` (a group of datapoints that fail more
    than the rest) or ``'group'`` (one without a meta column: an embedding cluster).
    """

    name: str
    idx: frozenset[int]
    meta_columns: tuple[str, ...]
    finding: str
    description: str


@dataclass(frozen=True)
class Marks:
    """Which planted causes one datapoint of ``PlantedSignalsDataset`` or ``PlantedSequencesDataset`` carries.

    ``systematic``: in the group whose *training* labels all name another class (an annotation rule gone wrong:
    the model learns the wrong class for it, while its validation labels are right); ``variant``: the rare input
    variant no meta column records; ``flipped``: its label replaced at random by another class; ``category``: it
    has the categorical meta cause's value; ``above``: its numeric meta cause's column is at or above the threshold.
    """

    systematic: bool
    variant: bool
    flipped: bool
    category: bool
    above: bool


def planted_label(true_class: int, marks: Marks, split: str, systematic_class: int, other_class: int) -> int:
    """The label a datapoint is given: ``systematic_class`` for a member of the systematic group in training,
    ``other_class`` (drawn by the caller, never the true class) for a flipped one, else its true class."""
    if marks.systematic and split == "train":
        return systematic_class
    return other_class if marks.flipped else true_class


def other_class(rng: np.random.Generator, true_class: int, num_classes: int) -> int:
    """A class drawn uniformly among the others: the label of a random flip."""
    return int(rng.choice([c for c in range(num_classes) if c != true_class]))


def check_planted(num_datapoints: int, num_classes: int, max_classes: int, split: str,
                  systematic: Optional[tuple[int, int]]) -> None:
    """Reject arguments that would give an empty or mislabelled dataset."""
    if num_datapoints < 1:
        raise ValueError(f"num_datapoints must be at least 1, got {num_datapoints}")
    if not 2 <= num_classes <= max_classes:
        raise ValueError(f"num_classes must be between 2 and {max_classes}, got {num_classes}")
    if split not in SPLIT_CODES:
        raise ValueError(f"unknown split {split!r}; use one of {sorted(SPLIT_CODES)}")
    if systematic is not None and (len(systematic) != 2 or systematic[0] == systematic[1]
                                   or not all(0 <= c < num_classes for c in systematic)):
        raise ValueError(f"systematic must be two different classes of {num_classes}, got {systematic}")


def check_shares(**shares: float) -> None:
    """Reject a share outside [0, 1], naming it."""
    for name, share in shares.items():
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"{name} is a share between 0 and 1, got {share}")
