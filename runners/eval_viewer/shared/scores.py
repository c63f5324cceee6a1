"""Scores files (``validation_scores.json`` / ``evaluation_scores.json``) and the metric to rank by.

Format (see ``metrics/classification_metric.py``)::

    {'aggregated': {name: value}, 'per_datapoint': {name: [value per idx]},
     'datapoint_idx': [idx, ...], 'higher_is_better': {name: bool}}

NaN is stored as null; the table (``shared/table.py``) ranks a missing score as the worst,
since it usually means that something broke on the datapoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Optional

import numpy as np

from analysis.epoch_table import FAILURE_DEFINITION_ROLE
from run_dir.run_files import MIB, finite_or_none, read_run_json

MAX_SCORES_BYTES = 512 * MIB  # ~90 bytes per datapoint and score as Lantern writes it: millions of datapoints
_INT64 = (-(2**63), 2**63 - 1)


class ScoresError(ValueError):
    """A scores file is unreadable or not in the scores format."""


@dataclass(frozen=True)
class Scores:
    aggregated: dict[str, Optional[float]]
    per_datapoint: dict[str, np.ndarray]  # float64, NaN where the file has null
    datapoint_idx: list[int]
    higher_is_better: dict[str, bool]

    @property
    def rankable_metrics(self) -> list[str]:
        """Per-datapoint scores with a direction (``predicted_class`` has none)."""
        return [name for name in self.per_datapoint if name in self.higher_is_better]

    def row(self, idx: int) -> dict[str, Optional[float]]:
        """Every per-datapoint score of ``idx`` (empty if the file has no such datapoint)."""
        position = self._positions.get(idx)
        if position is None:
            return {}
        return {name: values[position] for name, values in self.per_datapoint.items()}

    @cached_property
    def _positions(self) -> dict[int, int]:
        return {idx: i for i, idx in enumerate(self.datapoint_idx)}


def read_scores(path: str) -> Scores:
    """Parse and check a scores file; ``ScoresError`` says what is wrong with it."""
    data = _read_layout(path)
    aggregated, higher_is_better = data.get("aggregated") or {}, data.get("higher_is_better") or {}
    if not _all_of(aggregated, (int, float, type(None))) or not _all_of(higher_is_better, (bool,)):
        raise ScoresError(f"{path}: 'aggregated' must map names to numbers and 'higher_is_better' names to "
                          "true/false; the file was not written by Lantern or was damaged: rerun the epoch")
    per_datapoint = {name: _numbers(values, name, path) for name, values in data["per_datapoint"].items()}
    return Scores({name: finite_or_none(value) for name, value in aggregated.items()}, per_datapoint,
                  _indices(data["datapoint_idx"], path), dict(higher_is_better))


def _read_layout(path: str) -> dict[str, Any]:
    """The file's JSON when it has the scores layout: one list entry per datapoint_idx for every score."""
    try:
        data = read_run_json(path, "scores file", MAX_SCORES_BYTES)
    except (OSError, ValueError) as exc:
        raise ScoresError(f"{path} cannot be read as JSON ({exc}); rerun the epoch to rewrite it") from exc
    if not isinstance(data, dict) or not isinstance(data.get("per_datapoint"), dict) \
            or not isinstance(data.get("datapoint_idx"), list):
        raise ScoresError(f"{path} is not a Lantern scores file: expected 'aggregated', 'per_datapoint', "
                          "'datapoint_idx' and 'higher_is_better'; rerun the epoch to rewrite it")
    count = len(data["datapoint_idx"])
    bad = [name for name, values in data["per_datapoint"].items() if not isinstance(values, list) or
           len(values) != count]
    if bad:
        raise ScoresError(f"{path}: per-datapoint scores {bad} do not have one value per datapoint_idx "
                          f"({count}); rerun the epoch to rewrite it")
    return data


def _indices(idx: list, path: str) -> list[int]:
    """``datapoint_idx`` when every entry is a dataset index (an integer a table column can hold)."""
    if not all(type(i) is int and _INT64[0] <= i <= _INT64[1] for i in idx):
        raise ScoresError(f"{path}: datapoint_idx holds a value that is not a dataset index (an integer); the "
                          "file was not written by Lantern or was damaged: rerun the epoch to rewrite it")
    return idx


def _all_of(mapping: Any, kinds: tuple[type, ...]) -> bool:
    return isinstance(mapping, dict) and all(type(value) in kinds for value in mapping.values())


def _numbers(values: list, name: str, path: str) -> np.ndarray:
    """One score per datapoint as float64 (null is NaN, true/false 1/0: Lantern wrote a boolean score so before
    it wrote 1/0); ``ScoresError`` naming the score when one is not a number: a string (even "1.5": NumPy would
    parse it), a list, an integer beyond a float."""
    try:
        strays = set(map(type, values)) - {float, int, bool, type(None)}
        if strays:
            raise ValueError(f"a {sorted(kind.__name__ for kind in strays)[0]} where a number belongs")
        column = np.array(values, dtype=np.float64)
    except (ValueError, OverflowError) as exc:
        raise ScoresError(f"{path}: per-datapoint score '{name}' holds a value that is not a number ({exc}); the "
                          "file was not written by Lantern or was damaged: rerun the epoch to rewrite it") from None
    return column


def default_metric(metrics: list[str], roles: dict[str, Any]) -> Optional[str]:
    """The metric the table is sorted by first, from the epoch table's ``roles``: the metric of the run's own
    ``failure_definition`` (what the run says fails, e.g. IoU for segmentation), else a loss (lower is better),
    which spreads the wrong datapoints out where a 0/1 accuracy would tie all of them; else the first of
    ``metrics``."""
    definition = roles.get(FAILURE_DEFINITION_ROLE)
    failure = definition.get("metric") if isinstance(definition, dict) else None
    if failure in metrics:
        return failure
    higher_is_better = roles.get("higher_is_better")
    higher_is_better = higher_is_better if isinstance(higher_is_better, dict) else {}
    losses = [name for name in metrics if not higher_is_better.get(name, True)]
    return (losses or metrics or [None])[0]
