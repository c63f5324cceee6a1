"""Each debugger's summary of each datapoint, collected as epoch-table columns while an epoch is captured.

A debugger that computes them for a whole batch (``summary_columns``: every ready-made one) gives its columns from its
batch output, in one call, before the copy to the host; ``summary()`` is called per datapoint for the others, after
the batch split. The runner joins the columns with the scores and the rows it collected itself
(``analysis.epoch_rows.gather_epoch_columns``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from debuggers.base_debugger import BaseDebugger
from debuggers.outputs import AloneOutputs, is_shared_record
from utils.column_chunks import ColumnChunks

SUMMARY_DTYPE = np.float32  # the precision of the tensors summarised; half the bytes a table page decodes


class DebuggerSummaries(ColumnChunks):
    """Each debugger's summary of each datapoint, as columns ``'<debugger name>.<key>'``.

    A summary that raises (or returns something other than numbers) is logged once per debugger and epoch
    and leaves that batch's cells empty: the table is a by-product of validation and must never stop it.
    """

    def __init__(self, debuggers: dict[str, BaseDebugger], log: logging.Logger) -> None:
        super().__init__()
        self.batched = {name: d for name, d in debuggers.items()
                        if type(d).summary_columns is not BaseDebugger.summary_columns}
        self.summarising = {name: d for name, d in debuggers.items()
                            if name in self.batched or type(d).summary is not BaseDebugger.summary}
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

    def batch_columns(self, outputs: dict[str, Any], computed: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """``summary_columns`` of each debugger that has them, from its batch output in ``outputs`` (what its
        pages get), where it gave one: not an error or not-run record, nor each datapoint's own output (a
        debugger run per datapoint: ``summary()`` of each, in ``add_batch``). ``computed``: those computed
        already (in a forward hook), or what that raised. Tensors stay on their device."""
        columns: dict[str, dict[str, Any]] = {}
        for name, debugger in self.batched.items():
            output = outputs.get(name)
            if output is None or is_shared_record(output) or isinstance(output, AloneOutputs):
                continue
            try:
                batch = computed[name] if name in computed else debugger.summary_columns(output)
                if isinstance(batch, Exception):
                    raise batch
                columns[name] = batch or {}
            except Exception as exc:  # a user's summary must not stop validation
                self._warn_once(name, "summary_columns()", exc)
                columns[name] = {}
        return columns

    def needs_rows(self, name: str, columns: dict[str, dict[str, Any]]) -> bool:
        """Whether debugger ``name``'s summaries of this batch come from its datapoints' split outputs."""
        return name in self.summarising and name not in columns

    def add_batch(self, idx: Sequence[int], per_name: dict[str, list[Any]],
                  columns: dict[str, dict[str, Any]]) -> None:
        """``columns``: ``batch_columns`` of the batch, on the host; ``per_name``: each debugger's outputs after
        the batch split, one per datapoint of ``idx``, for the summaries computed per datapoint."""
        rows_idx = np.asarray(idx, dtype=np.int64)
        for name, debugger in self.summarising.items():
            method = "summary_columns()" if name in columns else "summary()"
            try:
                batch = columns.get(name)
                if batch is None:
                    batch = _summary_columns([{} if is_shared_record(output) else debugger.summary(output)
                                              for output in per_name.get(name, [])])
                batch = {key: _column_of(values, len(rows_idx), key) for key, values in batch.items()}
            except Exception as exc:  # a user's summary must not stop validation
                self._warn_once(name, method, exc)
                continue
            for key, values in batch.items():
                self.add(f"{name}.{key}", rows_idx, values)

    def _warn_once(self, name: str, method: str, exc: Exception) -> None:
        if name not in self._failed:
            self._failed.add(name)
            self.log.warning(f"debugger '{name}': {method} failed ({type(exc).__name__}: {exc}); its columns "
                             "are left empty for those datapoints in the epoch table")


def _column_of(values: Any, rows: int, key: str) -> np.ndarray:
    """One (rows,) float column of a tensor, an array or a list (on the host)."""
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
