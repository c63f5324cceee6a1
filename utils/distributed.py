"""The few distributed pieces a runner needs, all no-ops in a single process.

``torchrun`` sets RANK / WORLD_SIZE / LOCAL_RANK; a plain ``python main.py``
does not, and then every function here behaves as for one process.

Every collective goes through ``_collective``: when another rank died or hangs,
the wait ends after the process group's timeout with a ``DistributedError``
that says so, instead of a backend message or a hang.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch.utils.data import Sampler

from utils.errors import LanternUserError

DEFAULT_TIMEOUT_S = 1800.0
T = TypeVar("T")
_timeout_s = DEFAULT_TIMEOUT_S


class DistributedError(LanternUserError):
    """A collective failed: another rank died, hangs, or took longer than the timeout."""


def env_world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def init_distributed(device: torch.device, timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[int, int]:
    """Join the process group torchrun describes (nccl for CUDA, else gloo); returns ``(rank, world_size)``."""
    global _timeout_s
    if env_world_size() == 1:
        return 0, 1
    if not dist.is_initialized():  # the caller has set the CUDA device already: nccl uses it
        _timeout_s = timeout_s
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, timeout=timedelta(seconds=timeout_s))
    return dist.get_rank(), dist.get_world_size()


def shutdown() -> None:
    """Leave the process group at the end of a run (NCCL warns when a process exits without it)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _collective(what: str, call: Callable[[], T]) -> T:
    try:
        return call()
    except RuntimeError as exc:  # gloo/NCCL timeouts and lost peers (DistBackendError is a RuntimeError)
        rank = dist.get_rank()
        raise DistributedError(
            f"rank {rank} of {dist.get_world_size()} gave up {what}: {exc}. Another rank probably failed or "
            "hangs: read its error in torchrun's output and its log (train_rank<r>.log / eval_rank<r>.log in the "
            f"work dir). If the ranks are only slow (large checkpoints or debug pages), raise "
            f"config['distributed_timeout_s'] (now {_timeout_s:g} s)"
        ) from exc


def barrier(what: str = "waiting for the other ranks") -> None:
    if is_distributed():
        _collective(what, dist.barrier)


def gather_objects(obj: Any) -> list[Any]:
    """Every rank's ``obj``, in rank order (``[obj]`` in a single process)."""
    if not is_distributed():
        return [obj]
    gathered: list[Any] = [None] * dist.get_world_size()
    _collective("gathering results from every rank", lambda: dist.all_gather_object(gathered, obj))
    return gathered


def broadcast_object(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank."""
    if not is_distributed():
        return obj
    box = [obj]
    _collective("receiving rank 0's data", lambda: dist.broadcast_object_list(box, src=0))
    return box[0]


def broadcast_buffers(module: torch.nn.Module) -> None:
    """Give every rank rank 0's buffers: DDP leaves BatchNorm statistics different on each rank after training."""
    if not is_distributed():
        return

    def send() -> None:
        for buffer in module.buffers():
            dist.broadcast(buffer, src=0)

    _collective("syncing model buffers from rank 0", send)


def mean_across_ranks(value: torch.Tensor) -> torch.Tensor:
    if not is_distributed():
        return value
    value = value.detach().clone()
    _collective("averaging the loss across ranks", lambda: dist.all_reduce(value))
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
