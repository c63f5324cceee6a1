"""Batching for Lantern datapoints (``inputs`` / ``labels`` / ``meta_info`` dicts)."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch

from utils.errors import DatasetContractError
from utils.ops import describe_value

CONTRACT = ("a dataset returns {'inputs': {...}, 'labels': {...}, 'meta_info': {'idx': i, ...}}, with tensors or "
            "numbers in inputs and labels and meta_info['idx'] the datapoint's index in the dataset; see "
            "docs/your_project.md \"The dataset\"")
PARTS = ("inputs", "labels", "meta_info")


def collate_datapoints(datapoints: list[dict]) -> dict:
    """Stack tensors in ``inputs``/``labels``; keep ``meta_info`` as lists, ``idx`` as a tensor.

    ``meta_info['idx']`` becomes a tensor so that debuggers can index with it;
    the other meta keys stay Python lists because they hold strings and flags.
    Plain numbers (a label given as an int) become tensors first.
    """
    if not datapoints:
        raise ValueError("collate_datapoints got an empty list; pass at least one datapoint")
    for datapoint in datapoints:
        check_datapoint(datapoint)
    batch = {key: _stack([dp[key] for dp in datapoints], key, datapoints) for key in ("inputs", "labels")}
    batch["meta_info"] = _collate_meta([dp["meta_info"] for dp in datapoints])
    return batch


def check_datapoint(datapoint: Any) -> None:
    """Refuse a datapoint of another form here, naming the contract: torch would fail later on, naming neither
    the contract nor the datapoint."""
    if not isinstance(datapoint, dict):
        hint = " (a torchvision-style (image, label)? wrap it in the three dicts)" if isinstance(
            datapoint, (tuple, list)) else ""
        raise _refused(f"the dataset returned {describe_value(datapoint)}{hint}")
    missing = [part for part in PARTS if not isinstance(datapoint.get(part), dict)]
    if missing:
        raise _refused(f"a datapoint with keys {sorted(map(str, datapoint))} lacks a dict under {missing}")
    meta = datapoint["meta_info"]
    if "idx" not in meta:
        raise _refused(f"a datapoint whose meta_info has keys {_keys(meta)} but no 'idx'")
    if not _is_index(meta["idx"]):
        raise _refused(f"a datapoint's meta_info['idx'] is {describe_value(meta['idx'])}, not an int")


def _stack(items: list[Any], path: str, datapoints: list[dict]) -> Any:
    """Stack tensors (plain numbers become tensors), recursing into dicts with the same keys."""
    if isinstance(items[0], dict):
        for item, datapoint in zip(items, datapoints):
            if not isinstance(item, dict) or set(item) != set(items[0]):
                raise _refused(f"datapoint idx={_idx(datapoint)}: {path} has keys {_keys(item)}, the batch's first "
                               f"datapoint {_keys(items[0])}; every datapoint needs the same keys")
        return {key: _stack([item[key] for item in items], f"{path}[{key!r}]", datapoints) for key in items[0]}
    tensors = [_as_tensor(item, path, datapoint) for item, datapoint in zip(items, datapoints)]
    try:
        return torch.stack(tensors)
    except RuntimeError as exc:
        odd = next((i for i, t in enumerate(tensors) if t.shape != tensors[0].shape), 0)
        raise DatasetContractError(
            f"{path} cannot be stacked into a batch: datapoint idx={_idx(datapoints[odd])} gives shape "
            f"{tuple(tensors[odd].shape)}, the batch's first (idx={_idx(datapoints[0])}) {tuple(tensors[0].shape)} "
            f"({exc}); give it the same shape and dtype in every datapoint (resize or pad in the dataset)"
        ) from exc


def _as_tensor(value: Any, path: str, datapoint: dict) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (numbers.Number, np.ndarray, np.generic)):
        return torch.as_tensor(value)
    raise _refused(f"datapoint idx={_idx(datapoint)}: {path} is {describe_value(value)}, not a tensor or a number "
                   "(put strings and other values in meta_info)")


def _collate_meta(metas: list[dict]) -> dict:
    meta = {key: [m.get(key) for m in metas] for key in metas[0]}
    meta["idx"] = torch.tensor([int(m["idx"]) for m in metas], dtype=torch.int64)
    return meta


def _refused(problem: str) -> DatasetContractError:
    return DatasetContractError(f"{problem}. Lantern's collate_datapoints expects that {CONTRACT}")


def _is_index(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return value.numel() == 1 and not value.is_floating_point() and not value.is_complex()
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, bool)


def _idx(datapoint: dict) -> int:
    """Its ``meta_info['idx']``, which ``check_datapoint`` has found to be an index."""
    return int(datapoint["meta_info"]["idx"])


def _keys(value: Any) -> Any:
    return sorted(map(str, value)) if isinstance(value, dict) else describe_value(value)

