"""Per-datapoint segmentation scores: IoU and Dice of the predicted mask, and the IoU the model predicted for it.

Two kinds of model are read:

- **masks** (a promptable segmenter, a binary one): logits ``(B, ..., h, w)`` against label masks of the same
  shape in {0, 1} (or without the logits' one channel: ``(B, H, W)`` for ``(B, 1, h, w)``), one mask per leading
  position (a clip's frames, say); a pixel is predicted when its logit is
  above 0. A datapoint's score is the mean over its masks.
- **classes** (FCN, U-Net, SegFormer): logits ``(B, K, h, w)`` against a ``(B, H, W)`` (or ``(B, 1, H, W)``) map
  of class indices; a pixel's prediction is its argmax. A datapoint's score is the mean over the classes present
  in its label or its prediction (per-image mIoU); pixels labelled ``ignore_index`` count for nothing.

Logits at a coarser resolution than the label are upsampled bilinearly to it first (SegFormer predicts at 1/4).
A datapoint whose inputs were found broken (``labels['valid']`` False, see ``data.datasets.prompted_masks``), or
whose label and prediction are both empty, scores NaN: it has no score, and the failure analysis counts it as
failing (an empty label with a predicted mask scores 0).
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F

from metrics.buffered_scores import BufferedScores
from utils.errors import DatasetContractError, ModelContractError
from utils.keyed import label, model_output

VALID_KEY = "valid"


def predicted_and_target(logits: torch.Tensor, target: torch.Tensor,
                         ignore_index: Optional[int] = 255) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The predicted and labelled masks as ``(B, S, C, H, W)`` booleans (S: masks per datapoint, C: classes) at the
    label's resolution, and where pixels count, ``(B, S, 1, H, W)``."""
    _check_real(logits, target)
    logits = logits.detach().float()
    if logits.ndim == 4 and logits.shape[1] > 1 and (target.ndim == 3 or (target.ndim == 4 and target.shape[1] == 1)):
        classes = logits.shape[1]  # a class map: one-hot both sides
        target = target.reshape(target.shape[0], *target.shape[-2:]).long()
        logits = _resized(logits, target.shape[-2:])
        counted = (target != ignore_index) if ignore_index is not None else torch.ones_like(target, dtype=torch.bool)
        predicted = F.one_hot(logits.argmax(dim=1), classes).permute(0, 3, 1, 2).bool()
        labelled = F.one_hot(target.clamp(0, classes - 1), classes).permute(0, 3, 1, 2).bool() & counted[:, None]
        return predicted[:, None], labelled[:, None], counted[:, None, None]
    if target.ndim == logits.ndim - 1 and logits.shape[-3] == 1:  # (B, 1, h, w) logits, a (B, H, W) mask
        target = target.unsqueeze(-3)
    if target.shape[:-2] != logits.shape[:-2]:
        raise ValueError(f"mask logits of shape {tuple(logits.shape)} and a label of shape {tuple(target.shape)}: "
                         "give one label mask per predicted mask (same leading dimensions), or a (B, H, W) class "
                         "map for (B, K, h, w) class logits")
    batch = logits.shape[0]
    logits = _resized(logits.reshape(batch, -1, *logits.shape[-2:]), target.shape[-2:])
    labelled = target.reshape(batch, -1, 1, *target.shape[-2:]) > 0.5
    return (logits > 0)[:, :, None], labelled, torch.ones_like(labelled)


def _check_real(logits: torch.Tensor, target: torch.Tensor) -> None:
    """Complex logits or labels have no order (``>`` is not defined for them), and a NaN label pixel is neither
    foreground nor background: each would make a mask silently empty, or fail deep inside torch."""
    if logits.is_complex():
        raise ModelContractError(f"the model's mask logits are complex ({logits.dtype}): return real logits (e.g. "
                                 "the magnitude or the real part of a complex output)")
    if target.is_complex():
        raise DatasetContractError(f"the label mask is complex ({target.dtype}): give 0/1 masks or class indices")
    if target.is_floating_point():
        missing = int(torch.isnan(target).sum())
        if missing:
            raise DatasetContractError(f"the label mask holds NaN at {missing} of {target.numel()} pixels: a pixel "
                                       "is 0 or 1 (or a class index); mark pixels that do not count with the "
                                       "ignore index (255) instead")


def _resized(logits: torch.Tensor, size: torch.Size) -> torch.Tensor:
    if tuple(logits.shape[-2:]) == tuple(size):
        return logits
    return F.interpolate(logits, size=tuple(size), mode="bilinear", align_corners=False)


def mask_overlaps(predicted: torch.Tensor, labelled: torch.Tensor, counted: torch.Tensor) -> dict[str, torch.Tensor]:
    """IoU and Dice of each mask, ``(B, S)``, from ``predicted_and_target``'s masks: the mean over the classes present
    in the label or the prediction; NaN where there are none (an empty label and an empty prediction)."""
    predicted = predicted & counted
    intersection = (predicted & labelled).sum(dim=(-2, -1)).double()
    sizes = predicted.sum(dim=(-2, -1)).double() + labelled.sum(dim=(-2, -1)).double()
    union = sizes - intersection
    present = union > 0
    iou = torch.where(present, intersection / union.clamp(min=1), torch.nan)
    dice = torch.where(present, 2 * intersection / sizes.clamp(min=1), torch.nan)
    return {"iou": iou.nanmean(dim=-1).float(), "dice": dice.nanmean(dim=-1).float()}


def overlap_scores(predicted: torch.Tensor, labelled: torch.Tensor, counted: torch.Tensor) -> dict[str, torch.Tensor]:
    """IoU and Dice per datapoint (B,): the mean over its masks (a clip's frames) of ``mask_overlaps``."""
    return {name: values.nanmean(dim=1) for name, values in mask_overlaps(predicted, labelled, counted).items()}


class SegmentationMetric(BufferedScores):
    """``iou``, ``dice``, and with ``iou_key`` (a model that predicts its masks' quality, as SAM does)
    ``predicted_iou`` and ``iou_prediction_error`` = |predicted IoU - IoU|.

    ``predicted_iou`` beside ``iou`` is a calibration pair: the viewer draws one against the other over the epoch.
    """

    def __init__(self, output_key: str = "masks", label_key: str = "mask", iou_key: Optional[str] = None,
                 ignore_index: Optional[int] = 255) -> None:
        self.output_key, self.label_key, self.iou_key, self.ignore_index = output_key, label_key, iou_key, ignore_index
        self.HIGHER_IS_BETTER = {"iou": True, "dice": True, **({"iou_prediction_error": False} if iou_key else {})}
        self.PER_DATAPOINT_ONLY = ("predicted_iou",) if iou_key else ()
        self.buffer: dict[int, dict[str, float]] = {}

    def __call__(self, outputs: dict, labels: dict) -> dict[str, torch.Tensor]:
        logits = model_output(outputs, self.output_key, self, "metric")
        target = label(labels, self.label_key, self, "metric")
        scores = overlap_scores(*predicted_and_target(logits, target, self.ignore_index))
        valid = labels.get(VALID_KEY) if isinstance(labels, dict) else None
        if valid is not None:
            scores = {name: torch.where(valid.bool(), values, torch.nan) for name, values in scores.items()}
        if self.iou_key:
            predicted = model_output(outputs, self.iou_key, self, "metric").detach().float()
            predicted = predicted.reshape(predicted.shape[0], -1).mean(dim=1)  # a clip: the mean over its frames
            scores["predicted_iou"] = predicted.to(scores["iou"].device)
            scores["iou_prediction_error"] = (scores["predicted_iou"] - scores["iou"]).abs()
        return scores

    def summarize(self, buffer: Optional[dict[int, dict[str, float]]] = None) -> dict:
        buffer = self.buffer if buffer is None else buffer
        order = sorted(buffer)
        names = [*self.HIGHER_IS_BETTER, *self.PER_DATAPOINT_ONLY]
        per_datapoint = {name: [buffer[i][name] for i in order] for name in names}
        return {
            "aggregated": {name: _nanmean(per_datapoint[name]) for name in self.HIGHER_IS_BETTER},
            "per_datapoint": per_datapoint,
            "datapoint_idx": order,
            "higher_is_better": dict(self.HIGHER_IS_BETTER),
        }


def _nanmean(values: list[float]) -> float:
    """The mean of the datapoints that have a score (a broken datapoint has none)."""
    finite = [v for v in values if v is not None and not math.isnan(v)]
    return sum(finite) / len(finite) if finite else float("nan")
