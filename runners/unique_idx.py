"""``meta_info['idx']`` names one datapoint: an evaluation pass must not see the same idx twice.

Scores, epoch tables and debug outputs are keyed by idx, so a repeated one would silently overwrite the
earlier datapoint's scores and give an aggregate over fewer datapoints than were evaluated.
"""

from __future__ import annotations

from collections.abc import Container

from utils.errors import DatasetContractError

_FIX = ("meta_info['idx'] must be unique per datapoint: the datapoint's index in the dataset (dataset[i] returns "
        "idx i). Fix the dataset's __getitem__ and run again; see docs/your_project.md \"The dataset\"")


def check_new_idx(seen: Container[int], idx: list[int]) -> None:
    """Refuse an idx of a batch that this pass already had (``seen``: the metric's buffer, keyed by the idx of
    the pass's earlier batches) or that the batch has twice."""
    batch: set[int] = set()
    for i in idx:
        if i in seen or i in batch:
            raise DatasetContractError(f"meta_info['idx']={i} came twice in one evaluation pass; {_FIX}")
        batch.add(i)


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
