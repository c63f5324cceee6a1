"""Debugger outputs on a GPU, copied to the host once per batch without a stall per tensor.

A synchronous ``tensor.cpu()`` waits for the GPU to finish everything queued before it, once
per tensor. Instead, every CUDA tensor of a batch's outputs is copied with
``non_blocking=True`` into a pinned (page-locked) host buffer, which the GPU's copy engine
writes directly, and the host waits once per device, after the last copy is queued: just
before the batch split reads the bytes (the summaries computed on the device come with
them). Pinned buffers come from PyTorch's caching host allocator, so after the first
batches no new pinned memory is allocated; a buffer goes back to the cache when the page
writer has written its bytes.

Outputs with no CUDA tensor are returned as they are, at the cost of one walk (none in a process that
never used CUDA).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from debuggers.outputs import PerDatapoint


def to_host(outputs: Any) -> Any:
    """``outputs`` with each CUDA tensor replaced by its host copy, the copies complete on return."""
    if not torch.cuda.is_initialized():  # no tensor can be on a GPU: no walk
        return outputs
    pending: dict[torch.device, torch.cuda.Event] = {}
    host = _copied(outputs, pending)
    for event in pending.values():
        event.synchronize()
    return host


def _copied(value: Any, pending: dict[torch.device, torch.cuda.Event]) -> Any:
    """``value`` with its CUDA tensors' copies queued; containers are rebuilt only around a copied tensor."""
    if isinstance(value, torch.Tensor):
        return _start_copy(value, pending) if value.is_cuda else value
    if isinstance(value, dict):
        items = {key: _copied(item, pending) for key, item in value.items()}
        return items if any(items[key] is not item for key, item in value.items()) else value
    if isinstance(value, (list, tuple)):
        items = [_copied(item, pending) for item in value]
        if all(new is old for new, old in zip(items, value)):
            return value
        if isinstance(value, PerDatapoint):
            return type(value)(items)
        return items if isinstance(value, list) else tuple(items)
    return value


def _start_copy(tensor: torch.Tensor, pending: dict[torch.device, torch.cuda.Event]) -> torch.Tensor:
    """A pinned host tensor that ``tensor`` is being copied into; the device's event marks the copy's end."""
    tensor = tensor.detach()
    host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    host.copy_(tensor, non_blocking=True)
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(tensor.device))
    pending[tensor.device] = event  # copies on one stream finish in order: the last event covers them all
    return host


def copy_arrays(data: Any) -> Any:
    """``data`` with every tensor (detached) and array inside dicts, lists and tuples copied."""
    if isinstance(data, torch.Tensor):
        return data.detach().clone()
    if isinstance(data, np.ndarray):
        return data.copy()
    if isinstance(data, dict):
        return {key: copy_arrays(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(copy_arrays(value) for value in data)
    return data
