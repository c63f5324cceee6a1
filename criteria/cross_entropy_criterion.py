"""Cross-entropy between a model's logits and the class label."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from utils.keyed import label, model_output


class CrossEntropyCriterion:
    """Mean cross-entropy of ``outputs[output_key]`` against ``labels[label_key]``."""

    def __init__(self, output_key: str = "logits", label_key: str = "class", label_smoothing: float = 0.0) -> None:
        self.output_key = output_key
        self.label_key = label_key
        self.label_smoothing = label_smoothing

    def __call__(self, outputs: dict, labels: dict) -> torch.Tensor:
        return F.cross_entropy(model_output(outputs, self.output_key, self, "criterion"),
                               label(labels, self.label_key, self, "criterion"), label_smoothing=self.label_smoothing)
