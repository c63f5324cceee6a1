"""Batching for Lantern datapoints (``inputs`` / ``labels`` / ``meta_info`` dicts)."""

from __future__ import annotations

from typing import Any

import torch


def collate_datapoints(datapoints: list[dict]) -> dict:
    """Stack tensors in ``inputs``/``labels``; keep ``meta_info`` as lists, ``idx`` as a tensor.

    ``meta_info['idx']`` becomes a tensor so that debuggers can index with it;
    the other meta keys stay Python lists because they hold strings and flags.
    """
    if not datapoints:
        raise ValueError("collate_datapoints got an empty list; pass at least one datapoint")
    batch = {key: _stack([dp[key] for dp in datapoints]) for key in ("inputs", "labels")}
    batch["meta_info"] = _collate_meta([dp["meta_info"] for dp in datapoints])
    return batch


def _stack(items: list[Any]) -> Any:
    """Stack tensors, recursing into dicts with the same keys."""
    if isinstance(items[0], dict):
        return {key: _stack([item[key] for item in items]) for key in items[0]}
    return torch.stack(items)


def _collate_meta(metas: list[dict]) -> dict:
    meta = {key: [m[key] for m in metas] for key in metas[0]}
    meta["idx"] = torch.tensor(meta["idx"], dtype=torch.int64)
    return meta
