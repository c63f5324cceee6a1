"""What the Embeddings map is coloured by, keyed as its picker names it: ``failure`` (the run's failure definition,
as the Failures tab counts it), ``column:<name>`` (label and prediction by class name, any score, meta-info field
or summary of the epoch table), ``tag:<name>`` (the run's tags) and ``finding:<key>`` (a Failures finding, once its
findings need no analysis to be shown: ``ViewerBackend.findings_ready``).

A column of few values (labels, a tag, a category) is drawn as categories, one colour each, the rarest drawn last (on
top); one of many numbers on a continuous scale.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from analysis.epoch_table import EpochTable
from analysis.failures import FailureDefinition
from run_dir.tags_file import TagsFileError
from runners.eval_viewer.embeddings.data import rows_in
from runners.eval_viewer.failures.data import finding_names, narrowing_of
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.runs import Epoch
from runners.eval_viewer.shared.table import HIDDEN_COLUMNS
from runners.eval_viewer.table.filter_text import LABEL_COLUMNS
from runners.eval_viewer.tags.data import run_tags

FAILURE = "failure"
COLUMN, TAG, FINDING = "column:", "tag:", "finding:"
MAX_CATEGORIES = 12  # more distinct values than this are numbers (or, for text, the most common and 'other')
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#393b79", "#637939"]
MEMBER, REST, NONE = "#d62728", "#9aa6b2", "#d0d0d0"  # in a set (failed, tagged, found) / the rest / no value


@dataclass
class Colouring:
    """The map's colours: categories (a name, a colour and the map's rows of each, drawn in this order) or a number
    per row (NaN: none, drawn grey)."""

    title: str
    categories: list[tuple[str, str, np.ndarray]] = field(default_factory=list)
    numbers: Optional[np.ndarray] = None


def colour_options(backend: ViewerBackend, epoch: Epoch, run_path: Optional[str]) -> list[dict]:
    """The picker's options: failure, the table's columns, the run's tags, and the epoch's findings where they are
    ready (else one disabled option saying how to have them)."""
    table = backend.table(epoch)
    columns = [name for name, _ in table.columns() if name != "idx" and name not in HIDDEN_COLUMNS]
    ordered = [name for name in LABEL_COLUMNS if name in columns] + [n for n in columns if n not in LABEL_COLUMNS]
    options = [{"label": "failure", "value": FAILURE}] + [{"label": n, "value": COLUMN + n} for n in ordered]
    try:
        options += [{"label": f"tag: {name}", "value": TAG + name} for name in run_tags(run_path).tags]
    except TagsFileError:
        pass  # the tag bar says why
    findings = backend.findings_ready(epoch)
    if findings is None:
        return options + [{"label": "Failures findings: open the Failures tab first", "value": FINDING,
                           "disabled": True}]
    return options + [{"label": f"finding · {what}", "value": FINDING + key} for key, what in finding_names(findings)]


def colouring(backend: ViewerBackend, epoch: Epoch, run_path: Optional[str], key: str, map_idx: np.ndarray
              ) -> Colouring:
    """The colours of the map's rows (``map_idx``, its datapoints) by ``key``."""
    table = backend.table(epoch)
    if key.startswith(TAG):
        name = key[len(TAG):]
        tagged = np.isin(map_idx, run_tags(run_path).tags.get(name, np.zeros(0, np.int64)))
        return _member_of(f"tag {name}", tagged, f"tagged {name}", "not tagged")
    if key.startswith(FINDING):
        found = narrowing_of(backend, run_path, epoch.key, key[len(FINDING):])
        chosen = np.isin(map_idx, (found or {}).get("idx") or [])
        return _member_of(f"finding: {(found or {}).get('what', 'none')}", chosen, "in the finding", "the rest")
    if key == FAILURE and isinstance(table, EpochTable):
        names = [name for name in ("idx", *LABEL_COLUMNS) if table.has_column(name)]
        values = table.values(names)
        failed, definition = FailureDefinition().failed(table, values)
        rows = rows_in(values["idx"], map_idx)
        return _member_of(f"failure ({definition})", _taken(failed.astype(bool), rows, False), "failed", "passed")
    name = key[len(COLUMN):] if key.startswith(COLUMN) else table.roles.get("scores", ["idx"])[0]
    values = table.values(["idx", name])
    column = _taken(values[name], rows_in(values["idx"], map_idx), None)
    if name in LABEL_COLUMNS:
        classes = backend.class_names(epoch)
        column = np.array([None if v is None or v != v else classes.get(int(v), str(int(v))) for v in column],
                          dtype=object)
    return _by_values(name, column)


def _taken(column: np.ndarray, rows: np.ndarray, missing: object) -> np.ndarray:
    """``column``'s value at each of ``rows`` (``missing`` where -1)."""
    found = np.empty(len(rows), dtype=object if column.dtype == object or missing is None else column.dtype)
    found[:] = missing
    found[rows >= 0] = column[rows[rows >= 0]]
    return found


def _member_of(title: str, chosen: np.ndarray, member: str, rest: str) -> Colouring:
    return Colouring(title, [(f"{rest} ({(~chosen).sum()})", REST, np.flatnonzero(~chosen)),
                             (f"{member} ({chosen.sum()})", MEMBER, np.flatnonzero(chosen))])


def _by_values(name: str, column: np.ndarray) -> Colouring:
    """Categories for a column of few values or of text, else a number per row."""
    missing = np.array([v is None or (isinstance(v, float) and v != v) for v in column], dtype=bool)
    present = column[~missing]
    numeric = all(isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_)) for v in present)
    if numeric and len(np.unique(present.astype(np.float64))) > MAX_CATEGORIES:
        return Colouring(name, numbers=np.where(missing, np.nan, column).astype(np.float64))
    distinct, counts = np.unique(present.astype(str), return_counts=True) if len(present) else ([], [])
    order = np.argsort(-np.asarray(counts), kind="stable")
    kept = [distinct[i] for i in order[:MAX_CATEGORIES - 1]] if len(distinct) > MAX_CATEGORIES else \
        [distinct[i] for i in order]
    text = np.where(missing, "", column.astype(str))
    categories = [(f"{value} ({(text == value).sum()})", PALETTE[i % len(PALETTE)], np.flatnonzero(text == value))
                  for i, value in enumerate(kept)]
    other = ~missing & ~np.isin(text, kept)
    if other.any():
        categories.append((f"other ({other.sum()})", PALETTE[-1], np.flatnonzero(other)))
    if missing.any():
        categories.append((f"no value ({missing.sum()})", NONE, np.flatnonzero(missing)))
    return Colouring(name, sorted(categories, key=lambda category: -len(category[2])))
