"""Calibration pairs of an epoch: a score ``X`` the model predicts for itself (``predicted_X``) beside the true one.

A metric that reports both (``SegmentationMetric``: ``iou`` and ``predicted_iou``, a SAM-style IoU head) gets, for
each datapoint, a scatter of predicted against true over the whole epoch. The epoch table gives the two columns;
an even sample of at most ``MAX_POINTS`` datapoints keeps the figure light whatever the epoch's size.
"""

from __future__ import annotations

import numpy as np

from runners.eval_viewer.figures.context import Calibration
from runners.eval_viewer.shared.table import Table

PREDICTED_PREFIX = "predicted_"
MAX_POINTS = 2000


def calibration_points(table: Table, max_points: int = MAX_POINTS) -> Calibration:
    """``{X: {'true', 'predicted', 'idx'}}`` for every score ``X`` of ``table`` with a score ``predicted_X``."""
    scores = set(table.roles.get("scores", []))
    pairs = {name[len(PREDICTED_PREFIX):]: name for name in sorted(scores)
             if name.startswith(PREDICTED_PREFIX) and name[len(PREDICTED_PREFIX):] in scores}
    found: Calibration = {}
    for true, predicted in pairs.items():
        values = table.values(["idx", true, predicted])
        step = max(1, -(-len(values["idx"]) // max_points))
        found[true] = {"true": values[true][::step].astype(np.float64),
                       "predicted": values[predicted][::step].astype(np.float64), "idx": values["idx"][::step]}
    return found
