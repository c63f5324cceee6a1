"""One epoch's datapoints as a table the page asks for one page of rows at a time.

The table and the score grid never receive a whole epoch: the browser asks for
rows ``[start, end)`` under a filter and a sort, and gets only those (a 1M-datapoint
epoch costs the same per page as a 500-datapoint one). ``where`` is a structured
filter, a list of ``(column, op, value)`` triples, the same contract as
``analysis.epoch_table.EpochTable``: no text from the browser ever becomes a query.

``ScoresTable`` serves runs from their scores file (idx, every per-datapoint score,
the prediction); ``open_table`` picks it for an epoch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from runners.eval_viewer.backend.scores import Scores

Where = Sequence[tuple[str, str, Any]]
OPS = ("=", "!=", "<", "<=", ">", ">=", "in", "contains")
PREDICTION_SCORE = "predicted_class"  # the classification metric's per-datapoint prediction


class TableError(ValueError):
    """A filter or sort names a column the table does not have, or an operator it does not know."""


class ScoresTable:
    """``validation_scores.json`` / ``evaluation_scores.json`` of one epoch as columns of NumPy arrays.

    Missing scores (null) are NaN, and sort as the worst value (they usually mean that
    something broke on the datapoint).
    """

    def __init__(self, scores: Scores) -> None:
        self._columns: dict[str, np.ndarray] = {"idx": np.asarray(scores.datapoint_idx, dtype=np.int64)}
        for name, values in scores.per_datapoint.items():
            column = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
            if name == PREDICTION_SCORE and not np.isnan(column).any():
                column = column.astype(np.int64)
            self._columns["prediction" if name == PREDICTION_SCORE else name] = column
        self.higher_is_better = dict(scores.higher_is_better)

    def columns(self) -> list[tuple[str, str]]:
        """``(name, type)`` of every column; type is ``'int'``, ``'float'`` or ``'str'``."""
        return [(name, _type_of(values)) for name, values in self._columns.items()]

    def count(self, where: Optional[Where] = None) -> int:
        return int(self._mask(where).sum())

    def page(self, where: Optional[Where] = None, order_by: Optional[str] = None, descending: bool = True,
             offset: int = 0, limit: int = 100) -> list[dict]:
        """Rows ``offset .. offset + limit`` of the filtered table, sorted by ``order_by`` (ties by idx)."""
        positions = np.flatnonzero(self._mask(where))
        if order_by is not None:
            positions = positions[self._order(order_by, descending, positions)]
        chosen = positions[offset:offset + limit]
        return [{name: _plain(values[p]) for name, values in self._columns.items()} for p in chosen]

    def values(self, column: str) -> np.ndarray:
        """One whole column in table order (idx ascending): what the score grid draws."""
        return self._column(column)

    def percentile(self, column: str, value: float) -> Optional[float]:
        """Share (in %) of the epoch's datapoints whose ``column`` is at most ``value``; None without values."""
        values = self._column(column)
        values = values[~np.isnan(values)] if values.dtype.kind == "f" else values
        if not len(values) or value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        return float(100.0 * np.count_nonzero(values <= value) / len(values))

    def _order(self, column: str, descending: bool, positions: np.ndarray) -> np.ndarray:
        values = self._column(column)[positions].astype(np.float64)
        missing = np.isnan(values)
        key = np.where(missing, np.inf if descending else -np.inf, values)  # missing first either way
        key = -key if descending else key
        return np.lexsort((self._columns["idx"][positions], key))

    def _mask(self, where: Optional[Where]) -> np.ndarray:
        mask = np.ones(len(self._columns["idx"]), dtype=bool)
        for column, op, value in where or []:
            mask &= _compare(self._column(column), op, value)
        return mask

    def _column(self, name: str) -> np.ndarray:
        if name not in self._columns:
            raise TableError(f"no column '{name}' in this epoch's table; its columns: {list(self._columns)}")
        return self._columns[name]


def _compare(values: np.ndarray, op: str, value: Any) -> np.ndarray:
    if op == "in":
        return np.isin(values, np.asarray(list(value), dtype=values.dtype))
    if op == "contains":
        return np.array([str(value).lower() in str(v).lower() for v in values], dtype=bool)
    comparisons = {"=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
                   ">=": np.greater_equal}
    if op not in comparisons:
        raise TableError(f"unknown filter operator '{op}'; use one of {OPS}")
    return comparisons[op](values, value)


def _type_of(values: np.ndarray) -> str:
    return {"i": "int", "u": "int", "f": "float", "b": "int"}.get(values.dtype.kind, "str")


def _plain(value: Any) -> Any:
    """A JSON-ready Python value: NaN becomes None, NumPy scalars Python numbers."""
    if isinstance(value, np.generic):
        value = value.item()
    return None if isinstance(value, float) and math.isnan(value) else value
