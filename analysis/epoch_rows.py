"""Collecting an epoch table while a runner validates: columns grow batch by batch as NumPy chunks.

Two collectors feed one table: ``EpochRows`` (the runner's eval step: label, prediction, class
probabilities, scalar meta info) and ``DebuggerSummaries`` (inside ``SequentialDebugger``, after the batch
split: each debugger's ``summary()`` of each datapoint). Both keep a few arrays per batch, never a dict per
datapoint, so a million rows fit. ``gather_epoch_columns`` joins them with the metric's scores, across
ranks, into the columns ``analysis.epoch_table.write_epoch_table`` writes.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import torch

from debuggers.base_debugger import BaseDebugger
from debuggers.outputs import is_shared_record
from metrics.classification_metric import predicted_classes
from runners import distributed
from utils.ops import idx_list

Chunks = dict[str, list[tuple[np.ndarray, np.ndarray]]]
RESERVED = ("idx", "label", "prediction", "label_name", "prediction_name", "probabilities")


class ColumnChunks:
    """Named columns, each a list of ``(idx, values)`` chunks; a datapoint may lack a column."""

    def __init__(self) -> None:
        self.chunks: Chunks = {}

    def add(self, name: str, idx: np.ndarray, values: np.ndarray) -> None:
        self.chunks.setdefault(name, []).append((idx, values))

    def concatenated(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """One ``(idx, values)`` pair per column: the compact form sent from every rank to rank 0.

        Columns filled from the same batches share one idx array (collectors pass one array per batch).
        """
        joined: dict[tuple[int, ...], np.ndarray] = {}
        pairs = {}
        for name, parts in self.chunks.items():
            key = tuple(id(i) for i, _ in parts)
            if key not in joined:
                joined[key] = np.concatenate([i for i, _ in parts])
            pairs[name] = (joined[key], np.concatenate([v for _, v in parts]))
        return pairs


class EpochRows(ColumnChunks):
    """What the eval step knows of each datapoint besides its scores.

    For a classification metric (one with ``output_key`` and ``label_key``, like ``ClassificationMetric``)
    the model's logits give ``prediction`` and ``probabilities``, and the label ``label``; every other
    one-value-per-datapoint label is ``label.<key>``. Scalar meta-info fields (numbers, flags, strings)
    are kept; nested ones are not.
    """

    def __init__(self, output_key: Optional[str] = None, label_key: Optional[str] = None) -> None:
        super().__init__()
        self.output_key, self.label_key = output_key, label_key
        self.meta_names: list[str] = []

    @classmethod
    def for_metric(cls, metric: Any) -> EpochRows:
        return cls(getattr(metric, "output_key", None), getattr(metric, "label_key", None))

    def add_batch(self, datapoint: dict[str, Any]) -> None:
        idx = np.asarray(idx_list(datapoint["meta_info"]["idx"]), dtype=np.int64)
        logits = datapoint.get("outputs", {}).get(self.output_key) if self.output_key else None
        if isinstance(logits, torch.Tensor) and logits.shape[:1] == (len(idx),) and logits.ndim == 2:
            logits = logits.detach().float()
            self.add("probabilities", idx, logits.softmax(dim=1).cpu().numpy())
            self.add("prediction", idx, _predictions(logits))
        for key, value in datapoint.get("labels", {}).items():
            column = _scalar_column(value, len(idx))
            if column is not None:
                self.add("label" if key == self.label_key else f"label.{key}", idx, column)
        for key, value in datapoint["meta_info"].items():
            column = _scalar_column(value, len(idx)) if key != "idx" else None
            if column is not None:
                if key not in self.meta_names:
                    self.meta_names.append(key)
                self.add(f"meta:{key}", idx, column)


class DebuggerSummaries(ColumnChunks):
    """Each debugger's ``summary()`` of each datapoint, as columns ``'<debugger name>.<key>'``.

    A summary that raises (or returns something other than numbers) is logged once per debugger and epoch
    and leaves that batch's cells empty: the table is a by-product of validation and must never stop it.
    """

    def __init__(self, debuggers: dict[str, BaseDebugger], log: logging.Logger) -> None:
        super().__init__()
        self.summarising = {name: d for name, d in debuggers.items()
                            if type(d).summary is not BaseDebugger.summary}
        self.log = log
        self._failed: set[str] = set()

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


SUMMARY_DTYPE = np.float32  # the precision of the tensors summarised; half the bytes a table page decodes


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


def gather_epoch_columns(scores: dict, rows: EpochRows, summaries: Optional[ColumnChunks],
                         class_names: Optional[Sequence[str]], is_main: bool
                         ) -> Optional[tuple[dict[str, np.ndarray], dict[str, Any]]]:
    """Every rank's rows joined with the scores on rank 0: ``(columns, roles)``; None on the other ranks.

    Called by every rank: it gathers. Rows are ordered by idx, which ``scores['datapoint_idx']`` gives.
    ``roles`` says which columns are scores (and which way is better), meta info, labels and summaries.
    """
    local = {"rows": rows.concatenated(), "meta": rows.meta_names,
             "summaries": summaries.concatenated() if summaries is not None else {}}
    gathered = distributed.gather_objects(local)
    if not is_main:
        return None
    idx = np.asarray(scores["datapoint_idx"], dtype=np.int64)
    columns: dict[str, np.ndarray] = {"idx": idx}
    roles: dict[str, Any] = {"scores": list(scores["per_datapoint"]),
                             "higher_is_better": scores.get("higher_is_better", {}), "meta": [], "summaries": []}
    rows_by_name = _merge([part["rows"] for part in gathered], idx)
    for name in ("label", "prediction"):
        if name in rows_by_name:
            columns[name] = rows_by_name.pop(name)
    if class_names:
        for name in ("label", "prediction"):
            if name in columns:
                columns[f"{name}_name"] = _class_names(columns[name], class_names)
    if "probabilities" in rows_by_name:
        columns["probabilities"] = rows_by_name.pop("probabilities").astype(np.float32)
    for name, values in scores["per_datapoint"].items():
        columns[name] = np.array([math.nan if v is None else v for v in values], dtype=np.float64)
    meta_names = [n for part in gathered for n in part["meta"]]
    for key in dict.fromkeys(meta_names):
        name = f"meta.{key}" if key in columns or key in RESERVED or "." in key else key
        columns[name] = rows_by_name.pop(f"meta:{key}")
        roles["meta"].append(name)
    columns.update(rows_by_name)  # label.<key> columns
    for name, values in _merge([part["summaries"] for part in gathered], idx).items():
        if name not in columns:
            columns[name] = values
            roles["summaries"].append(name)
    return columns, roles


def _merge(parts: list[dict[str, tuple[np.ndarray, np.ndarray]]], idx: np.ndarray) -> dict[str, np.ndarray]:
    """Scatter each column's ``(idx, values)`` pairs from every rank into arrays aligned with ``idx``.

    A datapoint without a value gets NaN (None for strings); a column every datapoint has keeps its type.
    """
    pieces: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for part in parts:
        for name, pair in part.items():
            pieces.setdefault(name, []).append(pair)
    positions: dict[int, np.ndarray] = {}  # by id of a shared idx array: each is looked up once
    for where, _ in (pair for pairs in pieces.values() for pair in pairs):
        if id(where) not in positions:
            positions[id(where)] = np.searchsorted(idx, where)
    merged = {}
    for name, pairs in pieces.items():
        where = np.concatenate([positions[id(w)] for w, _ in pairs])
        values = np.concatenate([v for _, v in pairs])
        seen = np.zeros(len(idx), dtype=bool)
        seen[where] = True
        complete = bool(seen.all())
        column = np.empty((len(idx), *values.shape[1:]), dtype=values.dtype) if complete \
            else _empty(values, len(idx))
        column[where] = values
        merged[name] = column
    return merged


def _empty(like: np.ndarray, length: int) -> np.ndarray:
    shape = (length, *like.shape[1:])
    if like.dtype.kind in "fiub":  # numbers and flags: a missing cell is NaN
        return np.full(shape, np.nan, dtype=like.dtype if like.dtype.kind == "f" else np.float64)
    return np.full(shape, None, dtype=object)


def _predictions(logits: torch.Tensor) -> np.ndarray:
    """The predicted class per row, NaN where it is none (``predicted_classes``)."""
    predicted, finite = (values.cpu().numpy() for values in predicted_classes(logits))
    return predicted if finite.all() else np.where(finite, predicted, np.nan)


def _class_names(classes: np.ndarray, names: Sequence[str]) -> np.ndarray:
    lookup = np.array(list(names) + [None], dtype=object)
    valid = np.isfinite(classes) & (classes >= 0) & (classes < len(names))
    return lookup[np.where(valid, classes, len(names)).astype(np.int64)]


def _scalar_column(value: Any, batch_size: int) -> Optional[np.ndarray]:
    """One number, flag or string per datapoint as an array; None for anything else."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value if value.shape == (batch_size,) and value.dtype.kind in "fiub" else None
    if not isinstance(value, (list, tuple)) or len(value) != batch_size:
        return None
    if all(isinstance(v, (bool, np.bool_)) for v in value):
        return np.asarray(value, dtype=bool)
    if all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in value):
        return np.asarray(value, dtype=np.float64 if any(isinstance(v, float) for v in value) else np.int64)
    if all(isinstance(v, str) for v in value):
        return np.asarray(value, dtype=object)
    return None
