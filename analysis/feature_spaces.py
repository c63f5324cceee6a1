"""The feature spaces of an epoch that can be drawn as a map (``analysis/projection.py``), each named by a key, and
their vectors, one per datapoint:

- ``debugger:<name>``: a debugger's captured feature vectors (a ``layer_output``, or a 1-D array), pooled per
  datapoint as the failure analysis pools them (``analysis/internals.py``), read from the epoch's debug pages;
- ``summaries``: the debuggers' summaries, the epoch table's summary columns, each standardised (their units
  differ); a summary a datapoint lacks counts as the column's mean;
- ``probabilities``: the model's per-class probabilities (the epoch table's list column).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from analysis.epoch_table import EpochTable
from analysis.internals import feature_space_names, read_feature_space
from debuggers.pages.reader import load_debug_outputs
from utils.errors import LanternUserError

SUMMARIES = "summaries"
PROBABILITIES = "probabilities"
DEBUGGER_PREFIX = "debugger:"
NUMERIC = ("float", "integer", "boolean")


class SpaceError(LanternUserError):
    """An epoch has no such feature space; the message lists those it has."""


@dataclass(frozen=True)
class Space:
    key: str
    label: str  # as a picker shows it
    standardise: bool = False  # columns of different units: each scaled to unit variance before the map


def epoch_spaces(table: EpochTable, outputs: Optional[dict[str, Any]]) -> list[Space]:
    """The spaces of an epoch: its debuggers' feature vectors (seen in ``outputs``, one captured datapoint's debug
    outputs, None without any), its summaries (two columns or more) and its probabilities."""
    spaces = [Space(DEBUGGER_PREFIX + name, f"{name} (captured features)")
              for name in feature_space_names(outputs or {})]
    summaries = summary_columns(table)
    if len(summaries) >= 2:
        spaces.append(Space(SUMMARIES, f"debugger summaries ({len(summaries)} columns)", standardise=True))
    if table.has_column(PROBABILITIES):
        spaces.append(Space(PROBABILITIES, "predicted probabilities"))
    return spaces


def sample_outputs(epoch_dir: str) -> Optional[dict[str, Any]]:
    """The debug outputs of the epoch's first captured datapoint (what ``epoch_spaces`` looks at), None without any
    (``DebugDataError`` when its pages cannot be read)."""
    outputs = load_debug_outputs(epoch_dir)  # None: the debugger did not run for this epoch
    first = min(outputs, default=None) if outputs is not None else None
    return None if first is None else outputs[first]


def summary_columns(table: EpochTable) -> list[str]:
    kinds = dict(table.columns())
    return [name for name in table.roles.get("summaries", []) if kinds.get(name) in NUMERIC]


def space_vectors(epoch_dir: str, table: EpochTable, space: Space) -> tuple[np.ndarray, np.ndarray]:
    """(idx, (n, d) vectors) of ``space`` in the epoch of ``epoch_dir`` (``table`` its epoch table)."""
    if space.key.startswith(DEBUGGER_PREFIX):
        return read_feature_space(epoch_dir, space.key[len(DEBUGGER_PREFIX):])
    if space.key == PROBABILITIES:
        values = table.arrays(["idx", PROBABILITIES])
        return values["idx"], np.asarray(values[PROBABILITIES], dtype=np.float32)
    columns = summary_columns(table)
    values = table.arrays(["idx", *columns])
    matrix = np.stack([_numbers(values[name]) for name in columns], axis=1)
    with np.errstate(all="ignore"):
        means = np.nanmean(np.where(np.isfinite(matrix), matrix, np.nan), axis=0)
    filled = np.where(np.isfinite(matrix), matrix, np.nan_to_num(means))
    return values["idx"], filled.astype(np.float32)


def _numbers(column: np.ndarray) -> np.ndarray:
    """A column as float64, NaN where it holds no value (a boolean column with nulls comes as objects)."""
    if column.dtype == object:
        column = np.where(np.equal(column, None), np.nan, column)
    return column.astype(np.float64)


def find_space(spaces: list[Space], key: Any) -> Space:
    """The space of ``spaces`` keyed ``key``; ``SpaceError`` naming those there are."""
    found = next((space for space in spaces if space.key == key), None)
    if found is None:
        raise SpaceError(f"the epoch has no feature space {str(key)[:80]!r}; its spaces: "
                         f"{', '.join(space.key for space in spaces) or 'none'}")
    return found
