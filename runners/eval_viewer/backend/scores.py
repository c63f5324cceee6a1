"""Scores files (``validation_scores.json`` / ``evaluation_scores.json``) and the metric to rank by.

Format (see ``metrics/classification_metric.py``)::

    {'aggregated': {name: value}, 'per_datapoint': {name: [value per idx]},
     'datapoint_idx': [idx, ...], 'higher_is_better': {name: bool}}

NaN is stored as null; the table (``backend/table.py``) ranks a missing score as the worst,
since it usually means that something broke on the datapoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional

from utils.atomic_files import read_json


class ScoresError(ValueError):
    """A scores file is unreadable or not in the scores format."""


@dataclass(frozen=True)
class Scores:
    aggregated: dict[str, Optional[float]]
    per_datapoint: dict[str, list]
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
    try:
        data = read_json(path)
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
    return Scores(dict(data.get("aggregated") or {}), data["per_datapoint"],
                  [int(i) for i in data["datapoint_idx"]], dict(data.get("higher_is_better") or {}))


def default_metric(metrics: list[str], higher_is_better: dict[str, bool]) -> Optional[str]:
    """The metric the table is sorted by first: a loss (lower is better) spreads the wrong datapoints out,
    where a 0/1 accuracy would tie all of them; the first of ``metrics`` when there is no loss."""
    losses = [name for name in metrics if not higher_is_better.get(name, True)]
    return (losses or metrics or [None])[0]
