"""Tensor helpers shared by the ready-made debuggers.

They keep the batch contract in one place: which dimension is the batch, how a
layer output that is not the expected tensor is reported, and how one
datapoint is taken out of a batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

import numpy as np
import torch

from debuggers.pages.buffer_pool import BufferPool


def describe(value: Any) -> str:
    """A short description of a layer output for error messages: ``Tensor(8, 64, 4, 4)``, ``tuple``."""
    if isinstance(value, torch.Tensor):
        return f"Tensor{tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__} of ({', '.join(describe(v) for v in value)})"
    return type(value).__name__


def require_tensor(output: Any, where: str, debugger: str, ndim: int | None = None, min_ndim: int = 2,
                   what: str = "a batch-first tensor") -> torch.Tensor:
    """``output`` if it is a tensor of the expected rank; otherwise a clear error naming the layer."""
    ok = isinstance(output, torch.Tensor) and (output.ndim == ndim if ndim is not None else output.ndim >= min_ndim)
    if not ok:
        raise TypeError(f"{debugger} needs {what} from {where}, which returned {describe(output)}; "
                        "hook a layer whose output is such a tensor (see model.named_modules())")
    return output


def per_datapoint(tensor: torch.Tensor) -> torch.Tensor:
    """(B, N) float view of a batch: one row of values per datapoint."""
    return tensor.detach().reshape(tensor.shape[0], -1).float()


def as_tensor(value: Any) -> torch.Tensor:
    """A tensor of ``value`` (a tensor, a NumPy array, numbers) for ``summary_columns`` arithmetic, without a copy
    where it can (a read-only array, as a page or ``numpy.broadcast_to`` gives, is copied: torch refuses to share
    it)."""
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        value = np.array(value)
    return torch.as_tensor(value)


def std_along_last(values: torch.Tensor, means: torch.Tensor, pool: Optional[BufferPool] = None) -> torch.Tensor:
    """The population std along the last dimension of float ``values``, given their ``means`` there: two passes
    (centre, then each row's dot product with itself), as exact as ``Tensor.std`` and an order of magnitude faster
    on a CPU, where its one-pass kernel runs element by element. The centred values go in ``pool``'s reused
    memory where one is given (a batch's fresh block costs more in page faults than the arithmetic)."""
    centred = pool.empty_like(values) if pool is not None else torch.empty_like(values)
    torch.sub(values, means[..., None], out=centred)
    return torch.linalg.vecdot(centred, centred).div_(values.shape[-1]).sqrt_()


ONE_PASS_SPREAD = 8.0  # mean**2 / variance up to which the std of sums is within 1e-6 of the two-pass one


def channel_totals(maps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each channel's sum and sum of squares, (B, C) float64, of float (B, C, ...) ``maps``: two reading passes
    and nothing written the size of the maps (a product of the maps with themselves would be a fresh block,
    page-faulted again each batch)."""
    channels = maps.reshape(*maps.shape[:2], -1)
    return channels.sum(2).double(), torch.linalg.vector_norm(channels, dim=2).double().square()


def mean_and_std_of_sums(values: torch.Tensor, total: torch.Tensor,
                         squares: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean and population std along the last dimension of float (B, N) ``values``, given each row's sum and
    sum of squares (float64): the std from the sums where the row's mean is not large against its spread, which
    costs no pass over the values; the rows where it is (the sums' rounding would then show), and rows that are
    not finite, get the two-pass ``std_along_last`` in float64 (a mean of float32 sums, far from zero, is off by
    more than the spread of values close to it)."""
    count = values.shape[-1]
    mean = total / count
    mean_square = mean.square()
    variance = squares / count - mean_square
    exact = ~(mean_square <= ONE_PASS_SPREAD * variance)
    std = variance.clamp_(min=0).sqrt_()
    if exact.any():
        rows = values[exact].double()
        std[exact] = std_along_last(rows, rows.mean(-1))
    return mean, std


def iter_tensors(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor inside nested tuples, lists and dicts (module inputs and outputs)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from iter_tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from iter_tensors(item)


def batch_size_of(datapoint: dict[str, Any]) -> int:
    """The batch size, from the first tensor of ``datapoint['inputs']``."""
    for tensor in iter_tensors(datapoint.get("inputs")):
        if tensor.ndim >= 1:
            return int(tensor.shape[0])
    raise ValueError("datapoint['inputs'] holds no batch-first tensor, so the batch size is unknown; "
                     "inputs must be a dict of tensors of shape (B, ...)")


def select_datapoint(value: Any, i: int, batch_size: int) -> Any:
    """Datapoint ``i`` of a batch, keeping a batch of one: tensors (B, ...) become (1, ...)."""
    if isinstance(value, torch.Tensor):
        return value[i:i + 1] if value.ndim >= 1 and value.shape[0] == batch_size else value
    if isinstance(value, dict):
        return {k: select_datapoint(v, i, batch_size) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(select_datapoint(v, i, batch_size) for v in value)
    return value
