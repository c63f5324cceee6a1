"""SAM's training loss for prompted masks: a pixel loss and a Dice loss on the masks, and the squared error of the
predicted IoU against the IoU each mask really has."""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from metrics.segmentation_metric import VALID_KEY
from utils.keyed import label, model_output


class PromptedMaskCriterion:
    """``bce + dice_weight * dice + iou_weight * (predicted IoU - IoU)^2``, averaged over the datapoints.

    Mask logits ``(B, ..., h, w)`` against label masks ``(B, ..., H, W)`` (upsampled to them); SAM uses a focal
    loss where this uses binary cross-entropy (faster to converge on a small model). With several masks per prompt
    (``outputs[all_masks_key]`` (B, M, h, w), SAM's multimask output), a datapoint's mask loss is its best mask's
    and every mask's IoU prediction is trained. Datapoints whose inputs were found broken (``labels['valid']``
    False) add nothing.
    """

    def __init__(self, output_key: str = "masks", label_key: str = "mask", iou_key: Optional[str] = "iou_predictions",
                 all_masks_key: str = "all_masks", all_iou_key: str = "all_iou_predictions", dice_weight: float = 1.0,
                 iou_weight: float = 1.0) -> None:
        self.output_key, self.label_key, self.iou_key = output_key, label_key, iou_key
        self.all_masks_key, self.all_iou_key = all_masks_key, all_iou_key
        self.dice_weight, self.iou_weight = dice_weight, iou_weight

    def __call__(self, outputs: dict, labels: dict) -> torch.Tensor:
        several = self.all_masks_key in outputs
        logits = outputs[self.all_masks_key] if several else model_output(outputs, self.output_key, self, "criterion")
        target = label(labels, self.label_key, self, "criterion").float()
        if tuple(logits.shape[-2:]) != tuple(target.shape[-2:]):
            batch = logits.shape[0]
            logits = F.interpolate(logits.reshape(batch, -1, *logits.shape[-2:]), size=tuple(target.shape[-2:]),
                                   mode="bilinear", align_corners=False).reshape(*logits.shape[:-2], *target.shape[-2:])
        target = target.expand_as(logits)
        pixel = F.binary_cross_entropy_with_logits(logits, target, reduction="none").mean(dim=(-2, -1))
        probabilities = logits.sigmoid()
        intersection = (probabilities * target).sum(dim=(-2, -1))
        dice = 1 - (2 * intersection + 1) / (probabilities.sum(dim=(-2, -1)) + target.sum(dim=(-2, -1)) + 1)
        per_mask = pixel + self.dice_weight * dice  # (B, masks...)
        batch = per_mask.shape[0]
        loss = (per_mask.min(dim=1).values if several else per_mask).reshape(batch, -1).mean(dim=1)
        if self.iou_key is not None:
            predicted = outputs[self.all_iou_key] if several else model_output(outputs, self.iou_key, self, "criterion")
            error = (predicted.reshape(per_mask.shape) - _hard_iou(logits, target)).square()
            loss = loss + self.iou_weight * error.reshape(batch, -1).mean(dim=1)
        valid = labels.get(VALID_KEY)
        if valid is None:
            return loss.mean()
        weights = valid.to(loss.dtype)
        return (loss * weights).sum() / weights.sum().clamp(min=1)


def _hard_iou(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The IoU of each thresholded mask with its label (no gradient): what the IoU head learns to predict."""
    with torch.no_grad():
        predicted, labelled = logits > 0, target > 0.5
        intersection = (predicted & labelled).sum(dim=(-2, -1)).float()
        union = (predicted | labelled).sum(dim=(-2, -1)).float()
        return torch.where(union > 0, intersection / union.clamp(min=1), torch.ones_like(union))
