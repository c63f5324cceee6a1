"""Per-datapoint classification scores, so the viewer can rank datapoints.

A metric is called on a batch and returns one score per datapoint for each
metric name; the runner buffers them by dataset index, and ``summarize`` turns
the buffer into the file format every run writes::

    {'aggregated': {name: mean}, 'per_datapoint': {name: [value per idx]},
     'datapoint_idx': [idx, ...], 'higher_is_better': {name: bool}}

Lists in ``per_datapoint`` follow ``datapoint_idx``, which is sorted.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from metrics.buffered_scores import BufferedScores
from utils.keyed import label, model_output


class ClassificationMetric(BufferedScores):
    """Accuracy (0/1 per datapoint), cross-entropy and confidence of the true class.

    Logits that are not all finite predict nothing: every score of that datapoint is NaN (argmax would say
    class 0, and a datapoint of class 0 would pass), so capture policies count it as failing; the mean
    accuracy counts it as wrong.
    """

    HIGHER_IS_BETTER = {"accuracy": True, "cross_entropy": False, "true_class_confidence": True}
    PER_DATAPOINT_ONLY = ("predicted_class",)

    def __init__(self, output_key: str = "logits", label_key: str = "class") -> None:
        self.output_key = output_key
        self.label_key = label_key
        self.buffer: dict[int, dict[str, float]] = {}

    def __call__(self, outputs: dict, labels: dict) -> dict[str, torch.Tensor]:
        logits = model_output(outputs, self.output_key, self, "metric").detach().float()
        target = label(labels, self.label_key, self, "metric")
        probs = logits.softmax(dim=1)
        predicted, finite = predicted_classes(logits)
        return {
            "accuracy": _nan_where_not(finite, (predicted == target).float()),
            "cross_entropy": F.cross_entropy(logits, target, reduction="none"),
            "true_class_confidence": probs.gather(1, target[:, None])[:, 0],
            "predicted_class": _nan_where_not(finite, predicted.float()),
        }

    def summarize(self, buffer: dict[int, dict[str, float]] | None = None) -> dict:
        """Scores file content for ``buffer`` (default: this metric's own buffer)."""
        buffer = self.buffer if buffer is None else buffer
        order = sorted(buffer)
        names = list(self.HIGHER_IS_BETTER) + list(self.PER_DATAPOINT_ONLY)
        per_datapoint = {name: [buffer[i][name] for i in order] for name in names}
        aggregated = {name: _mean(per_datapoint[name], nan_as=0.0 if name == "accuracy" else None)
                      for name in self.HIGHER_IS_BETTER}
        return {
            "aggregated": aggregated,
            "per_datapoint": per_datapoint,
            "datapoint_idx": order,
            "higher_is_better": dict(self.HIGHER_IS_BETTER),
        }


def _nan_where_not(finite: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    return torch.where(finite, values, torch.full_like(values, float("nan")))


def _mean(values: list[float], nan_as: float | None) -> float:
    """The mean; ``nan_as``: the value a NaN counts as (a datapoint without a prediction is a wrong one)."""
    if not values:
        return float("nan")
    if nan_as is not None:
        values = [nan_as if math.isnan(v) else v for v in values]
    return sum(values) / len(values)


def predicted_classes(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The argmax class of each row, and whether the row's logits are all finite: argmax of NaN logits says
    class 0, which is no prediction (a datapoint of class 0 would count as right)."""
    return logits.argmax(dim=1), logits.isfinite().all(dim=1)
