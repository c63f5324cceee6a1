"""The few distributed pieces a runner needs, all no-ops in a single process.

``torchrun`` sets RANK / WORLD_SIZE / LOCAL_RANK; a plain ``python main.py``
does not, and then every function here behaves as for one process.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import Sampler


def init_distributed(device: str) -> tuple[int, int]:
    """Join the process group torchrun describes; returns ``(rank, world_size)``."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1:
        return 0, 1
    if not dist.is_initialized():
        backend = "nccl" if device.startswith("cuda") else "gloo"
        dist.init_process_group(backend=backend)
    return dist.get_rank(), dist.get_world_size()


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def gather_objects(obj: Any) -> list[Any]:
    """Every rank's ``obj``, in rank order (``[obj]`` in a single process)."""
    if not is_distributed():
        return [obj]
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, obj)
    return gathered


def broadcast_object(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank."""
    if not is_distributed():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def mean_across_ranks(value: torch.Tensor) -> torch.Tensor:
    if not is_distributed():
        return value
    value = value.detach().clone()
    dist.all_reduce(value)
    return value / dist.get_world_size()


class ShardSampler(Sampler[int]):
    """Rank ``r`` of ``n`` reads indices ``r, r+n, r+2n, ...`` in order.

    Unlike ``DistributedSampler`` it never pads, so in evaluation every index
    is seen exactly once across ranks (ranks may get one item more or less).
    """

    def __init__(self, num_items: int, rank: int, world_size: int) -> None:
        self.indices = list(range(rank, num_items, world_size))

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)
