"""Per-datapoint metrics; each run writes ``{'aggregated', 'per_datapoint'}`` scores."""

from metrics.classification_metric import ClassificationMetric

__all__ = ["ClassificationMetric"]
