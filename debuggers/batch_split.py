"""Split a debugger's batch output into one output per datapoint.

The batch contract: a debugger sees the whole batch and returns

* tensors and NumPy arrays with the batch as their first dimension: row ``i``
  belongs to datapoint ``i``;
* ``PerDatapoint([...])`` lists, one entry per datapoint;
* anything else (numbers, strings, plain lists, None): the same for every
  datapoint, kept as is.

Each datapoint's part is returned as a page value (``debuggers.pages.values``).

Dicts, plain lists and tuples are walked. A tensor whose first dimension is
not the batch size (or a 0-d tensor) breaks the contract and is an error, so
that batch size 1 and 8 always give the same per-datapoint outputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from debuggers.outputs import AloneOutputs, PerDatapoint, is_shared_record
from debuggers.pages.batch_values import DatapointValues, Rows
from debuggers.pages.value_rules import join_path
from debuggers.pages.values import check_value_nodes, page_key, to_page_value

_NUMERIC_KINDS = "biufc"  # 1-d rows of these are Python numbers, as a 0-d tensor's .item() would be


class BatchContractError(ValueError):
    """A debugger output does not have the batch first."""


def split_batch(output: Any, batch_size: int, path: str = "") -> list[Any]:
    """``batch_size`` page values (``to_page_value``), one per datapoint, from one batch output.

    ``path`` (the debugger's name) starts the location that error messages give.

    Each tensor is converted once for the whole batch and every datapoint gets a view of its row,
    so the per-datapoint cost is a few Python operations, not a tensor conversion.
    """
    return list(split_batch_value(output, batch_size, path)[0])


def split_batch_value(output: Any, batch_size: int, path: str = "") -> tuple[DatapointValues, Any]:
    """``split_batch``, made when asked for (``DatapointValues``), and the same outputs as one batch value
    (``debuggers.pages.batch_values``): its ``Rows`` are the converted batch arrays (and ``PerDatapoint`` lists)
    the datapoints' values are rows of. Every conversion, and every check of the contract, is made here."""
    if is_shared_record(output):
        batch_value = to_page_value(output)
    else:
        check_value_nodes(output, path)  # its plain lists and dicts, before the split: a big one is refused at once
        batch_value = _split(output, batch_size, path)
        check_value_nodes(batch_value, path)  # each datapoint's part, as its record header will list it
    return DatapointValues(batch_value, range(batch_size)), batch_value


def _split(value: Any, batch_size: int, path: str) -> Any:
    if isinstance(value, (torch.Tensor, np.ndarray)):
        if value.ndim == 0 or value.shape[0] != batch_size:
            raise BatchContractError(
                f"output{_show(path)} has shape {tuple(value.shape)} but the batch has {batch_size} "
                "datapoint(s): return tensors with the batch first (e.g. output.mean(dim=(1, 2, 3)) instead "
                "of output.mean()), or Python numbers for values shared by the whole batch"
            )
        array = to_page_value(value, path)
        if array.ndim == 1 and array.dtype.kind not in _NUMERIC_KINDS:  # strings, dates: each a page value
            return Rows([to_page_value(item, join_path(path, i)) for i, item in enumerate(array)])
        return Rows(array)
    if isinstance(value, PerDatapoint):
        if len(value) != batch_size:
            raise BatchContractError(
                f"output{_show(path)} is a PerDatapoint list of {len(value)} entries for a batch of {batch_size}"
            )
        alone = isinstance(value, AloneOutputs)  # each entry is a whole output
        return Rows([to_page_value(item, path if alone else join_path(path, i)) for i, item in enumerate(value)])
    if isinstance(value, dict) and value:
        keys = [page_key(key, path) for key in value]
        return {key: _split(item, batch_size, join_path(path, key)) for key, item in zip(keys, value.values())}
    if isinstance(value, (list, tuple)) and value:
        container = list if isinstance(value, list) else tuple
        return container(_split(item, batch_size, join_path(path, i)) for i, item in enumerate(value))
    return to_page_value(value, path)


def _show(path: str) -> str:
    return f" at '{path}'" if path else ""
