"""A batch's page values in column form: one value for the whole batch, whose ``Rows`` hold one entry per datapoint.

``debuggers.batch_split`` gives, beside one page value per datapoint, the same outputs as one
*batch value*: the structure of a datapoint's value (dicts, lists, tuples, and the values every
datapoint shares) with a ``Rows`` wherever the datapoints differ. Datapoint i's value is the batch
value with each ``Rows`` replaced by its i-th entry. The page writer encodes a batch from it with one
walk instead of one per datapoint, writes each batch array's rows as one stretch, and counts the
memory it keeps alive once per array (``debuggers.pages.encoding``, ``debuggers.pages.values``).
"""

from __future__ import annotations

from collections.abc import Sequence
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


def row_of(batch_value: Any, row: int) -> Any:
    """Datapoint ``row``'s page value: the batch value with each ``Rows`` replaced by its entry there (a 1-d
    array's as a Python number, as ``split_batch`` gives it)."""
    kind = type(batch_value)
    if kind is Rows:
        entries = batch_value.entries
        return entries[row].item() if type(entries) is np.ndarray and entries.ndim == 1 else entries[row]
    if kind is dict:
        return {key: row_of(item, row) for key, item in batch_value.items()}
    if kind is list or kind is tuple:
        return kind(row_of(item, row) for item in batch_value)
    return batch_value


class DatapointValues(Sequence):
    """The page values of a batch value's datapoints (at ``rows``, positions in the batch), each made when it is
    asked for. The page writer encodes a batch from its batch value, so on the usual path no datapoint's own
    value is ever made: a dict per datapoint and per debugger, made and dropped batch after batch, was more than
    half of what the batch's split took on the forward thread."""

    __slots__ = ("batch_value", "rows")

    def __init__(self, batch_value: Any, rows: range) -> None:
        self.batch_value, self.rows = batch_value, rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, position: int | slice) -> Any:
        if isinstance(position, slice):
            return DatapointValues(self.batch_value, self.rows[position])
        return row_of(self.batch_value, self.rows[position])
