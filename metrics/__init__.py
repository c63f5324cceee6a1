"""Per-datapoint metrics; each run writes ``{'aggregated', 'per_datapoint'}`` scores."""

from metrics.classification_metric import ClassificationMetric
from metrics.segmentation_metric import SegmentationMetric

__all__ = ["ClassificationMetric", "SegmentationMetric"]
