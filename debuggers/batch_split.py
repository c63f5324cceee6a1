"""Split a debugger's batch output into one output per datapoint.

The batch contract: a debugger sees the whole batch and returns

* tensors and NumPy arrays with the batch as their first dimension: row ``i``
  belongs to datapoint ``i``;
* ``PerDatapoint([...])`` lists, one entry per datapoint;
* anything else (numbers, strings, plain lists, None): the same for every
  datapoint, kept as is.

Dicts, plain lists and tuples are walked. A tensor whose first dimension is
not the batch size (or a 0-d tensor) breaks the contract and is an error, so
that batch size 1 and 8 always give the same per-datapoint outputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from debuggers.outputs import PerDatapoint, is_shared_record


class BatchContractError(ValueError):
    """A debugger output does not have the batch first."""


def split_batch(output: Any, batch_size: int) -> list[Any]:
    """``batch_size`` outputs, one per datapoint, from one batch output."""
    if is_shared_record(output):
        return [output] * batch_size
    return [_select(output, i, batch_size, "") for i in range(batch_size)]


def _select(value: Any, i: int, batch_size: int, path: str) -> Any:
    if isinstance(value, (torch.Tensor, np.ndarray)):
        if value.ndim == 0 or value.shape[0] != batch_size:
            raise BatchContractError(
                f"output{_show(path)} has shape {tuple(value.shape)} but the batch has {batch_size} "
                "datapoint(s): return tensors with the batch first (e.g. output.mean(dim=(1, 2, 3)) instead "
                "of output.mean()), or Python numbers for values shared by the whole batch"
            )
        return value[i]
    if isinstance(value, PerDatapoint):
        if len(value) != batch_size:
            raise BatchContractError(
                f"output{_show(path)} is a PerDatapoint list of {len(value)} entries for a batch of {batch_size}"
            )
        return value[i]
    if isinstance(value, dict):
        return {k: _select(v, i, batch_size, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_select(v, i, batch_size, f"{path}[{j}]") for j, v in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    return value


def _show(path: str) -> str:
    return f" at '{path}'" if path else ""
