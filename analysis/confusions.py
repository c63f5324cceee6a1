"""The main confusions: which label the model reads as which, how often, with the datapoints to open first.

A practitioner's first question about a classifier's failures is what it mistakes for what ("8 read as 1"): the
cells of the confusion matrix off its diagonal, largest first. A cell is listed when it holds at least
``MIN_COUNT`` failures (one mistake is not a pattern), with its share of the label's datapoints and a few example
idx: the mistakes the model makes most confidently (the highest probability of the wrong class), the clearest
cases to look at. Datapoints without a prediction (logits that were not finite) are left out, as in the matrix.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from analysis.findings import Confusion
from analysis.label_noise import class_name

MIN_COUNT = 2
EXAMPLES = 3


def main_confusions(values: dict[str, np.ndarray], top: int) -> list[Confusion]:
    """The ``top`` largest off-diagonal cells (label, prediction) holding at least MIN_COUNT datapoints, largest
    first (then by label and prediction); none without labels and predictions."""
    if "label" not in values or "prediction" not in values:
        return []
    predicted = np.isfinite(values["prediction"].astype(np.float64))
    labels = values["label"].astype(np.int64)
    predictions = np.where(predicted, values["prediction"], -1).astype(np.int64)
    wrong = np.flatnonzero(predicted & (labels != predictions))
    if not len(wrong):
        return []
    cells, counts = np.unique(np.column_stack([labels[wrong], predictions[wrong]]), axis=0, return_counts=True)
    order = np.lexsort((cells[:, 1], cells[:, 0], -counts))
    per_label = dict(zip(*np.unique(labels[predicted], return_counts=True)))
    confidence = _prediction_confidence(values, wrong)
    found = []
    for cell, count in zip(cells[order][:top], counts[order][:top]):
        if count < MIN_COUNT:
            break
        members = (labels[wrong] == cell[0]) & (predictions[wrong] == cell[1])
        rows = wrong[members]
        if confidence is not None:
            rows = rows[np.argsort(-confidence[members], kind="stable")]
        found.append(Confusion(class_name(values, int(cell[0]), "label"), class_name(values, int(cell[1]),
                                                                                     "prediction"),
                               int(count), int(count) / int(per_label[cell[0]]),
                               values["idx"][rows[:EXAMPLES]].tolist(), np.sort(values["idx"][rows])))
    return found


def _prediction_confidence(values: dict[str, np.ndarray], rows: np.ndarray) -> Optional[np.ndarray]:
    """The probability of its predicted class of each of ``rows`` (NaN as 0), or None without probabilities: read
    for those rows only, so a million rows of probabilities are never copied."""
    probabilities = values.get("probabilities")
    if probabilities is None or probabilities.ndim != 2:
        return None
    return np.max(np.nan_to_num(probabilities[rows].astype(np.float64), nan=0.0), axis=1)
