"""``config['failure_definition']``: which datapoints of this run count as failing, for the failure analysis.

    'failure_definition': {'metric': 'iou', 'worst_fraction': 0.15},

The runner keeps it in each epoch table's roles (``FAILURE_DEFINITION_ROLE``), where ``analysis.failures`` reads it:
the viewer's Failures tab and ``python -m runners.analyze`` then define failures as the worst share of that score
unless told otherwise (``--failure-metric``). Without it, a run with class labels and predictions fails where they
differ, and any other the worst 10 % of its first score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analysis.epoch_table import FAILURE_DEFINITION_ROLE
from utils.errors import ConfigError
from utils.settings import FRACTION, REQUIRED, TEXT, Settings, setting

__all__ = ["FAILURE_DEFINITION_ROLE", "FailureDefinitionSettings"]


@dataclass(frozen=True)
class FailureDefinitionSettings(Settings):
    """``config['failure_definition']``, the epoch table hook's settings."""

    KEY = "failure_definition"
    DOC = ("which datapoints the failure analysis counts as failing: the worst share of a per-datapoint score, "
           "checked against the metric's scores at start-up")
    SEE = "[analysis.md](analysis.md)"
    IDENTIFIES_RUN = False  # it changes how a run is read, not what is trained
    SWITCHED = False

    metric: str = setting(REQUIRED, TEXT, "a per-datapoint score of the metric")
    worst_fraction: float = setting(0.1, FRACTION, "the share of datapoints that count as failing")

    def role(self, metric: Any) -> dict[str, Any]:
        """The definition as each epoch table keeps it, once ``metric`` is known to give its score (where it says
        which it gives, as ``HIGHER_IS_BETTER`` and ``PER_DATAPOINT_ONLY``): refused here, before any epoch."""
        scores = [*getattr(metric, "HIGHER_IS_BETTER", {}), *getattr(metric, "PER_DATAPOINT_ONLY", ())]
        if scores and self.metric not in scores:
            raise ConfigError(f"{self.where()}['metric'] is {self.metric!r}, which {type(metric).__name__} does not "
                              f"give; its per-datapoint scores: {', '.join(scores)}")
        return {"metric": self.metric, "worst_fraction": float(self.worst_fraction)}
