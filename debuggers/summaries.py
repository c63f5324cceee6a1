"""Each debugger's ``summary()`` of each datapoint, collected as epoch-table columns while an epoch is captured.

``SequentialDebugger`` feeds ``DebuggerSummaries`` after the batch split; the runner joins its columns with the
scores and the rows it collected itself (``analysis.epoch_rows.gather_epoch_columns``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from debuggers.base_debugger import BaseDebugger
from debuggers.outputs import is_shared_record
from utils.column_chunks import ColumnChunks

SUMMARY_DTYPE = np.float32  # the precision of the tensors summarised; half the bytes a table page decodes


class DebuggerSummaries(ColumnChunks):
    """Each debugger's ``summary()`` of each datapoint, as columns ``'<debugger name>.<key>'``.

    A summary that raises (or returns something other than numbers) is logged once per debugger and epoch
    and leaves that batch's cells empty: the table is a by-product of validation and must never stop it.
    """

    def __init__(self, debuggers: dict[str, BaseDebugger], log: logging.Logger) -> None:
        super().__init__()
        self.summarising = {name: d for name, d in debuggers.items()
                            if type(d).summary is not BaseDebugger.summary}
        self.layers = {name: layer for name, d in debuggers.items()
                       if isinstance(layer := getattr(d, "layer_name", None) or getattr(d, "target_layer", None), str)}
        self.log = log
        self._failed: set[str] = set()

    def column_roles(self) -> dict[str, list[str]]:
        """The columns each role lists (``BaseDebugger.summary_roles``: 'outcome', 'input_region')."""
        roles: dict[str, list[str]] = {}
        for name, debugger in self.summarising.items():
            for key, role in debugger.summary_roles.items():
                roles.setdefault(role, []).append(f"{name}.{key}")
        return roles

    def reset(self) -> None:
        self.chunks, self._failed = {}, set()

    def add_batch(self, idx: Sequence[int], per_name: dict[str, list[Any]]) -> None:
        """``per_name``: each debugger's outputs after the batch split, one per datapoint of ``idx``."""
        rows_idx = np.asarray(idx, dtype=np.int64)
        for name, debugger in self.summarising.items():
            outputs = per_name.get(name, [])
            try:
                columns = None if any(map(is_shared_record, outputs)) else debugger.summary_columns(outputs)
                if columns is None:
                    columns = _summary_columns([{} if is_shared_record(output) else debugger.summary(output)
                                                for output in outputs])
                columns = {key: _column_of(values, len(rows_idx), key) for key, values in columns.items()}
            except Exception as exc:  # a user's summary must not stop validation
                self._warn_once(name, exc)
                continue
            for key, values in columns.items():
                self.add(f"{name}.{key}", rows_idx, values)

    def _warn_once(self, name: str, exc: Exception) -> None:
        if name not in self._failed:
            self._failed.add(name)
            self.log.warning(f"debugger '{name}': summary() failed ({type(exc).__name__}: {exc}); its columns "
                             "are left empty for those datapoints in the epoch table")


def _column_of(values: Any, rows: int, key: str) -> np.ndarray:
    column = np.asarray(values, dtype=SUMMARY_DTYPE)
    if column.shape != (rows,):
        raise ValueError(f"summary_columns() gave '{key}' of shape {column.shape} for a batch of {rows} datapoints; "
                         "give one number per datapoint")
    return column


def _summary_columns(summaries: list[dict[str, float]]) -> dict[str, np.ndarray]:
    """One float column per key; a datapoint whose summary lacks a key gets NaN there."""
    if not summaries or not isinstance(summaries[0], dict):
        return {}
    keys = list(summaries[0])
    if all(type(s) is dict and list(s) == keys for s in summaries):  # the usual case: one 2-D array
        table = np.array([list(s.values()) for s in summaries], dtype=SUMMARY_DTYPE).reshape(len(summaries), -1)
        return {str(key): table[:, k] for k, key in enumerate(keys)}
    keys = list(dict.fromkeys(key for summary in summaries for key in summary))
    return {str(key): np.array([summary.get(key, np.nan) for summary in summaries], dtype=SUMMARY_DTYPE)
            for key in keys}
