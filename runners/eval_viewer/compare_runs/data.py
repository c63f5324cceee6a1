"""Run against run: two epochs (of two runs, or of one run) joined by idx, as a table of their own.

For every idx either side has: the label, both predictions, the metric on both sides and its change
(``delta`` = second − first), and what happened to the prediction (``change``: right→wrong, wrong→right,
right in both, wrong in both, only in one side, no prediction). The join runs in DuckDB over the columns the
two tables give (``Table.values``: an epoch table or an older run's scores), with fixed SQL (the sides are
registered Arrow tables, their columns renamed to fixed names), and is written once per pair of tables as an
epoch table in a private temporary folder: it is then filtered, sorted and paged exactly as the epoch's own
table is (``analysis.epoch_table.EpochTable``: structured filters, values bound as parameters), and the file is
unlinked at once (the open table keeps it readable; nothing is left behind).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Optional

import duckdb
import numpy as np
import pyarrow as pa

from analysis.epoch_table import EpochTable, write_epoch_table
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import paging
from runners.eval_viewer.shared.cache import BoundedCache
from runners.eval_viewer.shared.runs import Epoch, Run
from runners.eval_viewer.shared.scores import default_metric
from runners.eval_viewer.shared.table import TABLE_ERRORS, Table
from runners.eval_viewer.table.data import where_of
from runners.eval_viewer.table.filter_text import LABEL_COLUMNS
from utils.errors import LanternUserError

RIGHT_TO_WRONG, WRONG_TO_RIGHT = "right→wrong", "wrong→right"
CHANGES = (RIGHT_TO_WRONG, WRONG_TO_RIGHT, "wrong in both", "right in both", "only in first", "only in second",
           "no prediction")
CLASS_COLUMNS = ("label", "prediction_a", "prediction_b")
SCORE_COLUMNS = ("score_a", "score_b", "delta")
DIFFS_KEPT = 4  # joined tables kept open (a 1M-datapoint pair is ~20 MB on disk, read a page at a time)
MEMORY_LIMIT = "1GB"
_JOIN = """
WITH joined AS (
    SELECT coalesce(a.idx, b.idx) AS idx, coalesce(a.label, b.label) AS label,
           a.prediction AS prediction_a, b.prediction AS prediction_b,
           a.score AS score_a, b.score AS score_b, b.score - a.score AS delta,
           a.idx IS NULL AS only_b, b.idx IS NULL AS only_a,
           a.prediction = a.label AS right_a, b.prediction = b.label AS right_b,
           a.label IS DISTINCT FROM b.label AND a.idx IS NOT NULL AND b.idx IS NOT NULL AS label_differs
    FROM side_a AS a FULL OUTER JOIN side_b AS b ON a.idx = b.idx)
SELECT idx, label, prediction_a, prediction_b, score_a, score_b, delta,
       CASE WHEN only_b THEN 'only in second' WHEN only_a THEN 'only in first'
            WHEN right_a IS NULL OR right_b IS NULL THEN 'no prediction'
            WHEN right_a AND NOT right_b THEN 'right→wrong' WHEN right_b AND NOT right_a THEN 'wrong→right'
            WHEN right_a THEN 'right in both' ELSE 'wrong in both' END AS change,
       label_differs
FROM joined ORDER BY idx
"""


class RunDiffError(LanternUserError):
    """The two epochs cannot be joined (a side has no labels or predictions, or not the metric)."""


@dataclass(frozen=True)
class Side:
    """One side of the comparison: a run's epoch."""

    run: Run
    epoch: Epoch

    @property
    def name(self) -> str:
        return f"{self.run.name} · {self.epoch.label}"


@dataclass
class RunDiff:
    """The joined table (columns ``idx, label, prediction_a, prediction_b, score_a, score_b, delta, change,
    label_differs``) and how many datapoints each change has."""

    table: EpochTable
    first: Side
    second: Side
    metric: str
    higher_is_better: bool
    counts: dict[str, int]
    mean_delta: Optional[float]
    labels_differ: int

    def summary(self) -> str:
        """``37 flipped to wrong, 52 to right; ...`` over every datapoint of both sides."""
        both = sum(self.counts.get(change, 0) for change in CHANGES[:4])
        parts = [f"{self.counts.get(RIGHT_TO_WRONG, 0)} flipped to wrong, {self.counts.get(WRONG_TO_RIGHT, 0)} to "
                 f"right, {self.counts.get('wrong in both', 0)} wrong in both, {self.counts.get('right in both', 0)} "
                 f"right in both (of {both} in both)"]
        if self.mean_delta is not None:
            better = (self.mean_delta > 0) == self.higher_is_better
            parts.append(f"mean Δ{self.metric} {self.mean_delta:+.4g} ({'better' if better else 'worse'} in the "
                         "second)" if self.mean_delta else f"mean Δ{self.metric} 0")
        for change in CHANGES[4:]:
            if self.counts.get(change):
                parts.append(f"{self.counts[change]} {change}")
        line = "; ".join(parts) + "."
        if self.labels_differ:
            line += f" {self.labels_differ} datapoints have different labels on the two sides: are they the same " \
                    "validation set?"
        return line


class RunDiffs:
    """Joined tables of the pairs of epochs compared, kept while their tables are the same files."""

    def __init__(self, backend: ViewerBackend, kept: int = DIFFS_KEPT) -> None:
        self.backend = backend
        self._diffs: BoundedCache[RunDiff] = BoundedCache(kept)
        self._folder = tempfile.mkdtemp(prefix="lantern-run-diff-")
        weakref.finalize(self, shutil.rmtree, self._folder, True)
        self._written = 0
        self._lock = threading.Lock()

    def diff(self, first: Side, second: Side, metric: Optional[str]) -> RunDiff:
        """The two sides joined by idx on ``metric`` (else the first side's default: its failure metric or loss);
        ``RunDiffError`` or a table error says why they cannot be."""
        tables = (self.backend.table(first.epoch), self.backend.table(second.epoch))
        metric = _shared_metric(self.backend, first, second, metric)
        return self._diffs.get((*tables, metric), lambda: self._join(first, second, tables, metric))

    def _join(self, first: Side, second: Side, tables: tuple[Table, Table], metric: str) -> RunDiff:
        connection = duckdb.connect(config={"memory_limit": MEMORY_LIMIT, "threads": 2})
        try:
            connection.register("side_a", _side_columns(first, tables[0], metric))
            connection.register("side_b", _side_columns(second, tables[1], metric))
            joined = connection.sql(_JOIN).to_arrow_table()
        except duckdb.Error as exc:
            raise RunDiffError(f"{first.name} and {second.name} cannot be joined by idx ({exc})") from exc
        finally:
            connection.close()
        table = self._opened({name: joined.column(name).combine_chunks() for name in joined.column_names})
        changes, counts = np.unique(joined.column("change").to_numpy(zero_copy_only=False), return_counts=True)
        deltas = joined.column("delta").to_numpy(zero_copy_only=False).astype(np.float64)
        return RunDiff(table, first, second, metric, self.backend.higher_is_better(first.epoch, metric),
                       dict(zip(changes.tolist(), counts.tolist())),
                       float(np.nanmean(deltas)) if np.isfinite(deltas).any() else None,
                       int(np.asarray(joined.column("label_differs")).sum()))

    def _opened(self, columns: dict[str, pa.Array]) -> EpochTable:
        """The joined columns as an epoch table, its file unlinked once open."""
        with self._lock:
            self._written += 1
            path = os.path.join(self._folder, f"diff_{self._written}.parquet")
        roles = {"scores": list(SCORE_COLUMNS), "higher_is_better": {}, "meta": [], "summaries": []}
        write_epoch_table(path, columns, roles)
        try:
            return EpochTable(path)
        finally:
            os.remove(path)


def _shared_metric(backend: ViewerBackend, first: Side, second: Side, metric: Optional[str]) -> str:
    """``metric`` where both sides have it, else the first side's default (its failure metric or loss) among those
    the second has."""
    metrics = [backend.metrics(side.epoch) for side in (first, second)]
    if metric in metrics[0] and metric in metrics[1]:
        return metric
    shared = [name for name in metrics[0] if name in metrics[1]]
    if not shared:
        raise RunDiffError(f"{first.name} and {second.name} share no per-datapoint score to compare ("
                           f"{', '.join(metrics[0]) or 'none'} against {', '.join(metrics[1]) or 'none'})")
    return default_metric(shared, backend.table(first.epoch).roles)


def _side_columns(side: Side, table: Table, metric: str) -> pa.Table:
    """idx, label, prediction and the metric of one side, under fixed names (its own names never reach SQL)."""
    columns = dict(table.columns())
    missing = [name for name in ("label", "prediction") if name not in columns]
    if missing or "problem" in table.roles:
        raise RunDiffError(f"{side.name} has no {' or '.join(missing) or 'readable table'} column: run against run "
                           "needs each side's labels and predictions (its epoch table); validate it again to write one")
    try:
        values = table.values(["idx", "label", "prediction", metric])
    except TABLE_ERRORS as exc:
        raise RunDiffError(f"{side.name} cannot be read: {exc}") from exc
    return pa.table({"idx": pa.array(values["idx"]), "label": _class_ids(values["label"]),
                     "prediction": _class_ids(values["prediction"]),
                     "score": pa.array(np.asarray(values[metric], dtype=np.float64), from_pandas=True)})


def _class_ids(values: np.ndarray) -> pa.Array:
    """Class ids as integers; a column with a missing one (NaN) stays float, the missing ones null."""
    values = np.asarray(values, dtype=np.float64)
    return pa.array(values, from_pandas=True) if np.isnan(values).any() else pa.array(values.astype(np.int64))


_DIFFS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a backend's joined tables, shared by its callers
_DIFFS_LOCK = threading.Lock()


def diffs_of(backend: ViewerBackend) -> RunDiffs:
    """The joined tables kept for ``backend`` (the page's first layout and the callbacks share them)."""
    with _DIFFS_LOCK:
        if backend not in _DIFFS:
            _DIFFS[backend] = RunDiffs(backend)
        return _DIFFS[backend]


def diff_rows(diff: RunDiff, request: Any, class_names: dict[int, str]) -> tuple[list[dict], int]:
    """Rows ``startRow .. endRow`` of the joined table under the request's filters and sort, and how many match."""
    asked = paging(request)
    where = diff_where(asked.filter_model, dict(diff.table.columns()), class_names)
    rows = diff.table.page(where=where, order_by=asked.sort, descending=asked.descending, offset=asked.start,
                           limit=asked.end - asked.start)
    return [{key: value for key, value in row.items() if key != "label_differs"} for row in rows], \
        diff.table.count(where)


def diff_where(filter_model: dict, kinds: dict[str, str], class_names: dict[int, str]) -> list[tuple]:
    """The joined table's filter boxes as ``(column, op, value)`` triples, typed as in the datapoint table
    (``where_of``): the label and both predictions take class names, as the table's ``label`` does."""
    where: list[tuple] = []
    for column, condition in filter_model.items():
        typed_as = LABEL_COLUMNS[0] if column in CLASS_COLUMNS else column
        where += [(column, *rest) for _, *rest in where_of({typed_as: condition}, {typed_as: kinds.get(column, "")},
                                                          class_names)]
    return where


def sides_of(backend: ViewerBackend, shown: dict) -> Optional[tuple[Side, Side]]:
    """The two sides ``shown`` names (``{'first': {'run', 'epoch'}, 'second': ...}``), None until both exist."""
    chosen = [shown.get(part) if isinstance(shown.get(part), dict) else {} for part in ("first", "second")]
    first, second = (side_of(backend, side.get("run"), side.get("epoch")) for side in chosen)
    return None if first is None or second is None else (first, second)


def side_of(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str]) -> Optional[Side]:
    """The side ``run_path``'s ``epoch_key`` is, None until both are chosen and exist (looked up, never used as
    given)."""
    run = backend.run(run_path if isinstance(run_path, str) else None)
    epoch = backend.epoch(run, epoch_key) if run else None
    return Side(run, epoch) if epoch else None
