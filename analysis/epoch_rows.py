"""Collecting an epoch table while a runner validates: columns grow batch by batch as NumPy chunks.

Two collectors feed one table: ``EpochRows`` (the runner's eval step: label, prediction, class
probabilities, scalar meta info) and ``debuggers.summaries.DebuggerSummaries`` (inside ``SequentialDebugger``,
after the batch split: each debugger's ``summary()`` of each datapoint). Both are ``ColumnChunks``: a few arrays
per batch, never a dict per datapoint, so a million rows fit. ``gather_epoch_columns`` joins them with the
metric's scores, across ranks, into the columns ``analysis.epoch_table.write_epoch_table`` writes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import torch

from debuggers.summaries import DebuggerSummaries
from metrics.classification_metric import predicted_classes
from utils import distributed
from utils.column_chunks import ColumnChunks
from utils.ops import idx_list

RESERVED = ("idx", "label", "prediction", "label_name", "prediction_name", "probabilities", "logsumexp")


class EpochRows(ColumnChunks):
    """What the eval step knows of each datapoint besides its scores.

    For a classification metric (one with ``output_key`` and ``label_key``, like ``ClassificationMetric``)
    the model's logits give ``prediction``, ``probabilities`` and ``logsumexp`` (with the probabilities, the logits
    themselves: the failure analysis tells columns that restate them), and the label ``label``; every other
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
            self.add("logsumexp", idx, logits.logsumexp(dim=1).cpu().numpy())
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


def gather_epoch_columns(scores: dict, rows: EpochRows, summaries: Optional[DebuggerSummaries],
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
        columns["logsumexp"] = rows_by_name.pop("logsumexp").astype(np.float32)
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
    if summaries is not None:
        for role, names in summaries.column_roles().items():
            roles[role] = [name for name in names if name in roles["summaries"]]
        roles["layers"] = dict(summaries.layers)
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
