"""A batch's page values in column form: one value for the whole batch, whose ``Rows`` hold one entry per datapoint.

``debuggers.batch_split`` gives, beside one page value per datapoint, the same outputs as one
*batch value*: the structure of a datapoint's value (dicts, lists, tuples, and the values every
datapoint shares) with a ``Rows`` wherever the datapoints differ. Datapoint i's value is the batch
value with each ``Rows`` replaced by its i-th entry. The page writer encodes a batch from it with one
walk instead of one per datapoint, writes each batch array's rows as one stretch, and counts the
memory it keeps alive once per array (``debuggers.pages.encoding``, ``debuggers.pages.values``).
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Rows:
    """One entry per datapoint: the rows of a C-contiguous batch array (the batch first), or a list of
    page values. A 1-d array's rows are numbers, as ``split_batch`` gives them."""

    __slots__ = ("entries",)

    def __init__(self, entries: np.ndarray | list[Any]) -> None:
        self.entries = entries


def take_rows(batch_value: Any, rows: slice | list[int]) -> Any:
    """The batch value of the datapoints at ``rows`` (positions in the batch), in that order.

    Taken arrays stay views of the batch's (a list of them, unless ``rows`` is a slice): the memory the
    datapoints keep alive is the same as their split values'."""
    kind = type(batch_value)
    if kind is Rows:
        entries = batch_value.entries
        if type(rows) is slice or (type(entries) is np.ndarray and entries.ndim == 1):
            return Rows(entries[rows])
        return Rows([entries[row] for row in rows])
    if kind is dict:
        return {key: take_rows(item, rows) for key, item in batch_value.items()}
    if kind is list or kind is tuple:
        return kind(take_rows(item, rows) for item in batch_value)
    return batch_value
