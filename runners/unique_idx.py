"""``meta_info['idx']`` names one datapoint: an evaluation pass must not see the same idx twice.

Scores, epoch tables and debug outputs are keyed by idx, so a repeated one would silently overwrite the
earlier datapoint's scores and give an aggregate over fewer datapoints than were evaluated.
"""

from __future__ import annotations

from utils.errors import DatasetContractError

_FIX = ("meta_info['idx'] must be unique per datapoint: the datapoint's index in the dataset (dataset[i] returns "
        "idx i). Fix the dataset's __getitem__ and run again; see docs/your_project.md \"The dataset\"")


class SeenIdx:
    """The idx met so far in one evaluation pass, kept apart from the metric's buffer: a metric may keep its
    buffer across passes or key it otherwise. One byte per datapoint of the dataset (1 MiB per million idx,
    where a set of ints takes 32), and a set for an idx outside ``range(dataset_size)``."""

    def __init__(self, dataset_size: int) -> None:
        self._met = bytearray(dataset_size)
        self._others: set[int] = set()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add_new(self, idx: list[int]) -> None:
        """Add a batch's ``idx``; refuse one that this pass (or this batch) already had."""
        for i in idx:
            if 0 <= i < len(self._met):
                repeated, self._met[i] = self._met[i], 1
            else:
                repeated = i in self._others
                self._others.add(i)
            if repeated:
                raise DatasetContractError(f"meta_info['idx']={i} came twice in one evaluation pass; {_FIX}")
        self._count += len(idx)


def merge_rank_buffers(buffers: list[dict[int, dict]]) -> dict[int, dict]:
    """Every rank's metric buffer in one dict; an idx that two ranks scored is refused (the evaluation sampler
    gives each datapoint to one rank only, so it was repeated by the dataset)."""
    merged: dict[int, dict] = {}
    owner: dict[int, int] = {}
    for rank, buffer in enumerate(buffers):
        for i, scores in buffer.items():
            if i in owner:
                raise DatasetContractError(
                    f"meta_info['idx']={i} came twice in one evaluation pass (on ranks {owner[i]} and {rank}); {_FIX}")
            owner[i] = rank
            merged[i] = scores
    return merged
