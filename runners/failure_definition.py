"""``config['failure_definition']``: which datapoints of this run count as failing, for the failure analysis.

    'failure_definition': {'metric': 'iou', 'worst_fraction': 0.15},

The runner keeps it in each epoch table's roles (``FAILURE_DEFINITION_ROLE``), where ``analysis.failures`` reads it:
the viewer's Failures tab and ``python -m runners.analyze`` then define failures as the worst share of that score
unless told otherwise (``--failure-metric``). Without it, a run with class labels and predictions fails where they
differ, and any other the worst 10 % of its first score.
"""

from __future__ import annotations

from typing import Any, Optional

from analysis.epoch_table import FAILURE_DEFINITION_ROLE
from utils.errors import ConfigError

__all__ = ["FAILURE_DEFINITION_ROLE", "checked_failure_definition"]

_FORM = "{'metric': <a per-datapoint score of the metric>, 'worst_fraction': <between 0 and 1, default 0.1>}"


def checked_failure_definition(entry: Any, metric: Any) -> Optional[dict[str, Any]]:
    """``entry`` as ``{'metric', 'worst_fraction'}``; None without one. A malformed entry, or a score the metric
    does not give (where it says which it gives, as ``HIGHER_IS_BETTER`` and ``PER_DATAPOINT_ONLY``), is refused
    here, before any epoch."""
    if entry is None:
        return None
    if not isinstance(entry, dict) or set(entry) - {"metric", "worst_fraction"} or not isinstance(
            entry.get("metric"), str):
        raise ConfigError(f"config['failure_definition'] must be {_FORM}, got {entry!r}")
    fraction = entry.get("worst_fraction", 0.1)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
        raise ConfigError(f"config['failure_definition']['worst_fraction'] is the share of datapoints that count as "
                          f"failing, between 0 and 1 (exclusive), got {fraction!r}")
    scores = [*getattr(metric, "HIGHER_IS_BETTER", {}), *getattr(metric, "PER_DATAPOINT_ONLY", ())]
    if scores and entry["metric"] not in scores:
        raise ConfigError(f"config['failure_definition']['metric'] is {entry['metric']!r}, which "
                          f"{type(metric).__name__} does not give; its per-datapoint scores: {', '.join(scores)}")
    return {"metric": entry["metric"], "worst_fraction": float(fraction)}
