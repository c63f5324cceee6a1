"""One epoch's datapoints as a table the page asks for one page of rows at a time.

The table and the score grid never receive a whole epoch: the browser asks for
rows ``[start, end)`` under a filter and a sort, and gets only those (a 1M-datapoint
epoch costs the same per page as a 500-datapoint one). ``where`` is a structured
filter, a list of ``(column, op, value)`` triples, the same contract as
``analysis.epoch_table.EpochTable``: no text from the browser ever becomes a query.

An epoch with ``epoch_table.parquet`` (``analysis.epoch_table``: labels, predictions
with class names, scores, scalar meta info, debugger summaries) is served from it;
``ScoresTable`` serves older runs from their scores file (idx and every per-datapoint
score) with the same methods.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any, Optional, Union

import numpy as np

from analysis.epoch_table import EpochTable, EpochTableError
from run_dir.errors import RunFileError
from run_dir.names import EPOCH_TABLE_FILE
from run_dir.run_files import refuse_link
from runners.eval_viewer.shared.scores import Scores, ScoresError

Where = Sequence[tuple[str, str, Any]]
Table = Union[EpochTable, "ScoresTable"]
TABLE_ERRORS = (ScoresError, EpochTableError, RunFileError)  # what reading an epoch's table can raise, with a message
OPS = ("=", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null", "differs from")
HIDDEN_COLUMNS = ("label_name", "prediction_name", "predicted_class")  # shown through label and prediction


def open_table(epoch_dir: str, scores: Callable[[], Scores]) -> Table:
    """The epoch table in ``epoch_dir`` when the run wrote one, else a table of ``scores()``."""
    path = os.path.join(epoch_dir, EPOCH_TABLE_FILE)
    return EpochTable(refuse_link(path, "epoch table")) if os.path.isfile(path) else ScoresTable(scores())


def class_names(table: Table) -> dict[int, str]:
    """``class id -> name`` from the table's label/prediction name columns (empty where it has none)."""
    columns = dict(table.columns())
    names: dict[int, str] = {}
    for ids, texts in (("label", "label_name"), ("prediction", "prediction_name")):
        if ids in columns and texts in columns:
            found = table.values([ids, texts])
            classes, first = np.unique(found[ids], return_index=True)  # one row per class, not per datapoint
            names.update(zip(classes.tolist(), found[texts][first].tolist()))
    return {int(i): str(name) for i, name in names.items() if _class_id(i) and name is not None}


def class_text(class_id: Any, class_names: Optional[dict[int, str]]) -> str:
    """``'ring (4)'`` where the epoch table names class 4, else ``'4'``, as the table shows classes."""
    name = (class_names or {}).get(int(class_id))
    return f"{name} ({int(class_id)})" if name is not None else str(int(class_id))


def _class_id(value: Any) -> bool:
    """Whether a label or prediction value is a class id: a whole number (a float column holds NaN where a
    datapoint has none, which ``int`` refuses)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and float(value).is_integer()


class ScoresTable:
    """``validation_scores.json`` / ``evaluation_scores.json`` of one epoch as columns of NumPy arrays.

    Missing scores (null) are NaN and sort last, as in the epoch table (filter ``is null`` finds them).
    """

    def __init__(self, scores: Scores) -> None:
        self._columns: dict[str, np.ndarray] = {"idx": np.asarray(scores.datapoint_idx, dtype=np.int64)}
        for name, values in scores.per_datapoint.items():  # checked numbers (``read_scores``), NaN for null
            self._columns[name] = np.asarray(values, dtype=np.float64)
        self.roles = {"scores": list(scores.per_datapoint), "higher_is_better": dict(scores.higher_is_better)}

    def columns(self) -> list[tuple[str, str]]:
        """``(name, type)`` of every column; type is ``'integer'`` or ``'float'`` (as the epoch table says)."""
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

    def values(self, columns: Sequence[str], where: Optional[Where] = None) -> dict[str, np.ndarray]:
        """Whole columns in idx order: what the score grid draws."""
        mask = self._mask(where)
        return {name: self._column(name)[mask] for name in columns}

    def percentile(self, column: str, value: float) -> Optional[float]:
        """Share (in %) of the epoch's datapoints whose ``column`` is at most ``value``; None without values."""
        values = self._column(column)
        values = values[~np.isnan(values)] if values.dtype.kind == "f" else values
        if not len(values) or value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        return float(100.0 * np.count_nonzero(values <= value) / len(values))

    def _order(self, column: str, descending: bool, positions: np.ndarray) -> np.ndarray:
        values = self._column(column)[positions].astype(np.float64)
        key = np.where(np.isnan(values), -np.inf if descending else np.inf, values)  # missing last either way
        key = -key if descending else key
        return np.lexsort((self._columns["idx"][positions], key))

    def _mask(self, where: Optional[Where]) -> np.ndarray:
        mask = np.ones(len(self._columns["idx"]), dtype=bool)
        for column, op, *value in where or []:
            other = self._column(value[0]) if op == "differs from" else value[0] if value else None
            mask &= _compare(self._column(column), op, other)
        return mask

    def _column(self, name: str) -> np.ndarray:
        if name not in self._columns:
            raise EpochTableError(f"no column '{name}' in this epoch's table; its columns: {list(self._columns)}")
        return self._columns[name]


def _compare(values: np.ndarray, op: str, value: Any) -> np.ndarray:
    """Where ``values op value`` holds; a missing value (NaN) is only ``is null``, as in SQL."""
    missing = np.isnan(values) if values.dtype.kind == "f" else np.zeros(len(values), dtype=bool)
    if op in ("is null", "is not null"):
        return missing if op == "is null" else ~missing
    if op == "differs from":  # ``value``: another column; a value differs from none (NaN != anything)
        return ~missing & (values != value)
    if op in ("in", "not in"):
        inside = np.isin(values, list(value))
        return inside if op == "in" else ~inside & ~missing
    comparisons = {"=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
                   ">=": np.greater_equal}
    if op not in comparisons:
        raise EpochTableError(f"unknown filter operator '{op}'; use one of {OPS}")
    return comparisons[op](values, value) & ~missing


def _type_of(values: np.ndarray) -> str:
    return "integer" if values.dtype.kind in "iu" else "float"


def _plain(value: Any) -> Any:
    """A JSON-ready Python value: NaN becomes None, NumPy scalars Python numbers."""
    if isinstance(value, np.generic):
        value = value.item()
    return None if isinstance(value, float) and math.isnan(value) else value
