"""``MaskDebugger``: each datapoint's label mask, predicted mask and prompt, for the mask figures."""

from __future__ import annotations

import math
from typing import Any, Optional

import torch
import torch.nn.functional as F

from data.datasets.prompted_masks import INPUT_ERROR_KEY
from debuggers.base_debugger import BaseDebugger
from debuggers.outputs import IGNORED, KIND_ERROR, KIND_MASK, PerDatapoint
from metrics.segmentation_metric import mask_overlaps, predicted_and_target
from utils.keyed import label, model_output


class MaskDebugger(BaseDebugger):
    """What the model predicted where, beside the label: the masks the viewer draws over the input, with the false
    positives and false negatives in colours of their own.

    Reads the model's mask logits ``outputs[output_key]`` and the label ``labels[label_key]`` as
    ``metrics.segmentation_metric`` does (binary masks ``(B, ..., h, w)`` with logits > 0 predicted, or ``(B, K, h,
    w)`` class logits against a class map), at the label's resolution, at most ``max_side`` pixels a side (strided
    beyond). ``point_key``: the prompt points in ``inputs``, drawn on the figure; ``iou_key``: the model's own
    prediction of its masks' IoU.

    Output ``{'kind': 'mask', 'label_mask', 'predicted_mask': (B, S, H, W) uint8, 'probability': (B, S, H, W)
    float16, 'iou', 'dice': (B,), 'mask_iou': (B, S), 'num_classes', 'point': (B, N, 2), 'predicted_iou': (B,),
    'mask_predicted_iou': (B, S), 'mask_step'}``: S masks per datapoint (a clip's frames; one for an image), values
    0/1, or class indices with 255 where the label is ignored; ``probability`` is the predicted pixels' probability
    (sigmoid, or the winning class's softmax); ``mask_step`` the stride the maps were kept at (1: every pixel;
    the points stay in the image's pixels). A datapoint whose inputs ``collate_prompted_masks`` found broken
    (``meta_info['input_error']``) gets an error record saying what is wrong, in place of its masks.
    """

    def __init__(self, output_key: str = "masks", label_key: str = "mask", iou_key: Optional[str] = None,
                 point_key: Optional[str] = "point", ignore_index: Optional[int] = IGNORED,
                 max_side: int = 256) -> None:
        self.output_key, self.label_key, self.iou_key, self.point_key = output_key, label_key, iou_key, point_key
        self.ignore_index, self.max_side = ignore_index, max_side

    def __call__(self, datapoint: dict[str, Any], model: torch.nn.Module) -> Any:
        logits = model_output(datapoint["outputs"], self.output_key, self, "debugger")
        target = label(datapoint["labels"], self.label_key, self, "debugger")
        predicted, labelled, counted = predicted_and_target(logits, target, self.ignore_index)
        overlaps = mask_overlaps(predicted, labelled, counted)
        step = self._step(predicted.shape[-2:])
        output: dict[str, Any] = {
            "kind": KIND_MASK,
            "label_mask": _strided(_class_map(labelled, counted), step),
            "predicted_mask": _strided(_class_map(predicted, None), step),
            "probability": _strided(_probability(logits.detach().float(), predicted.shape[-2:],
                                                 predicted.shape[2] > 1), step).half(),
            "iou": overlaps["iou"].nanmean(dim=1), "dice": overlaps["dice"].nanmean(dim=1),
            "mask_iou": overlaps["iou"], "num_classes": int(predicted.shape[2]), "mask_step": step,
        }
        point = datapoint["inputs"].get(self.point_key) if self.point_key else None
        if isinstance(point, torch.Tensor):
            output["point"] = point.detach().float().reshape(point.shape[0], -1, 2)
        if self.iou_key:
            predicted_iou = model_output(datapoint["outputs"], self.iou_key, self, "debugger").detach().float()
            output["mask_predicted_iou"] = predicted_iou.reshape(predicted_iou.shape[0], -1)
            output["predicted_iou"] = output["mask_predicted_iou"].mean(dim=1)
        return _with_input_errors(output, datapoint["meta_info"].get(INPUT_ERROR_KEY))

    def _step(self, size: torch.Size) -> int:
        """The stride that keeps a map of ``size`` within ``max_side`` pixels a side."""
        return max(1, math.ceil(max(size) / self.max_side))


def _strided(maps: torch.Tensor, step: int) -> torch.Tensor:
    return maps[..., ::step, ::step].contiguous() if step > 1 else maps


def _class_map(masks: torch.Tensor, counted: Optional[torch.Tensor]) -> torch.Tensor:
    """(B, S, C, H, W) booleans as a (B, S, H, W) uint8 map: the mask itself (C = 1), else the class index, 255
    where not counted."""
    if masks.shape[2] == 1:
        return masks[:, :, 0].to(torch.uint8)
    classes = masks.to(torch.uint8).argmax(dim=2).to(torch.uint8)
    return classes if counted is None else classes.masked_fill(~counted[:, :, 0], IGNORED)


def _probability(logits: torch.Tensor, size: torch.Size, classes: bool) -> torch.Tensor:
    """The probability of what each pixel is predicted to be, (B, S, H, W) at the label's ``size``: the winning
    class's softmax for class logits (S = 1), the foreground probability (sigmoid) of each mask."""
    flat = logits.reshape(logits.shape[0], -1, *logits.shape[-2:])
    if tuple(flat.shape[-2:]) != tuple(size):
        flat = F.interpolate(flat, size=tuple(size), mode="bilinear", align_corners=False)
    return flat.softmax(dim=1).amax(dim=1, keepdim=True) if classes else flat.sigmoid()


def _with_input_errors(output: dict[str, Any], errors: Any) -> Any:
    """``output`` as it is when no datapoint of the batch is broken; else one entry per datapoint, an error record
    for each broken one."""
    if not isinstance(errors, (list, tuple)) or not any(errors):
        return output
    rows = []
    for row, error in enumerate(errors):
        if error:
            rows.append({"kind": KIND_ERROR, "type": "InputError", "message": str(error), "traceback": ""})
        else:
            rows.append({key: value[row] if isinstance(value, torch.Tensor) else value
                         for key, value in output.items()})
    return PerDatapoint(rows)
