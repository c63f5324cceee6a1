"""``SegmentationGradCAMDebugger``: Grad-CAM of a class region of a segmentation model's output, one per datapoint."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from debuggers.gradcam_debugger import GradCAMDebugger, cam_spatial_stats
from debuggers.outputs import KIND_CAM
from utils.errors import ConfigError

REGIONS = ("predicted", "label", "all")


class SegmentationGradCAMDebugger(GradCAMDebugger):
    """Which pixels of the input raised the model's score for class ``target_class`` over a region of its output,
    seen from ``target_layer`` (Seg-Grad-CAM, Vinogradova et al., 2020).

    The score explained is the sum of the class's logits over the region, ``y = sum_{p in region} logits[c, p]``,
    where the region is where the model predicts the class (``'predicted'``: argmax == c for (B, K, h, w) class
    logits, logit > 0 for one mask channel per class), where the label says it is (``'label'``: ``labels[label_key]``,
    a class map or masks, brought to the logits' resolution by nearest neighbours), or every pixel (``'all'``). The
    rest is Grad-CAM as ``GradCAMDebugger`` computes it, from the evaluation loop's own forward pass:
    ``cam = ReLU(sum_c mean_hw(dy/dA_c) A_c)`` upsampled to the input and divided by its maximum; an empty region
    gives a zero cam.

    Output: ``GradCAMDebugger``'s fields (``cam``, ``target_class``, ``target_score``, ``raw_max``, ``spatial``,
    ``target_layer``), and ``region`` and ``region_pixels`` (B,), the region's size in logit pixels.
    """

    LOGITS_NDIM = 4

    def __init__(self, target_layer: str, target_class: int = 0, region: str = "predicted",
                 output_key: str = "logits", input_key: str = "image", label_key: str = "mask",
                 ignore_index: int = 255) -> None:
        if isinstance(target_class, bool) or not isinstance(target_class, int) or target_class < 0:
            raise ConfigError(f"SegmentationGradCAMDebugger target_class must be a class index >= 0, got "
                              f"{target_class!r}")
        if region not in REGIONS:
            raise ConfigError(f"SegmentationGradCAMDebugger region must be one of {REGIONS}, got {region!r}")
        super().__init__(target_layer, target_class, output_key, input_key, label_key)
        self.region, self.ignore_index = region, ignore_index

    def __call__(self, datapoint: dict[str, Any], model: torch.nn.Module) -> dict[str, Any]:
        activations, logits = self._activations_and_logits(datapoint, model)
        if self.target >= logits.shape[1]:
            raise ValueError(f"SegmentationGradCAMDebugger target_class {self.target} does not exist: the output "
                             f"'{self.output_key}' has {logits.shape[1]} channels (0..{logits.shape[1] - 1})")
        region = self._region(datapoint, logits.detach())
        with torch.enable_grad():
            scores = (logits[:, self.target] * region).sum(dim=(1, 2))
            (gradients,) = torch.autograd.grad(scores.sum(), activations, retain_graph=True)
        with torch.no_grad():
            cam, raw_max = self._cam(gradients, activations, datapoint)
        return {
            "kind": KIND_CAM, "cam": cam, "target_class": torch.full_like(scores, self.target, dtype=torch.long),
            "target_score": scores.detach(), "target_layer": self.target_layer, "raw_max": raw_max,
            "spatial": cam_spatial_stats(cam), "region": self.region, "region_pixels": region.sum(dim=(1, 2)),
        }

    def _logits(self, outputs: Any) -> torch.Tensor:
        logits = outputs.get(self.output_key) if isinstance(outputs, dict) else None
        if not isinstance(logits, torch.Tensor) or logits.ndim != 4:
            keys = list(outputs) if isinstance(outputs, dict) else type(outputs).__name__
            raise ValueError(f"SegmentationGradCAMDebugger needs the model output '{self.output_key}' as (B, K, h, w) "
                             f"logits; the model returned {keys}. Set output_key to the key of the mask logits")
        return logits

    def _region(self, datapoint: dict[str, Any], logits: torch.Tensor) -> torch.Tensor:
        """The (B, h, w) region, as the logits' dtype (1 inside, 0 outside)."""
        batch, classes, height, width = logits.shape
        if self.region == "all":
            return torch.ones((batch, height, width), dtype=logits.dtype, device=logits.device)
        if self.region == "predicted":
            inside = logits[:, self.target] > 0 if classes == 1 else logits.argmax(dim=1) == self.target
            return inside.to(logits.dtype)
        return self._labelled(datapoint, logits).to(logits.dtype)

    def _labelled(self, datapoint: dict[str, Any], logits: torch.Tensor) -> torch.Tensor:
        """Where the label puts the target class, at the logits' resolution."""
        labels = datapoint.get("labels")
        target = labels.get(self.label_key) if isinstance(labels, dict) else None
        if not isinstance(target, torch.Tensor) or target.shape[0] != logits.shape[0] or target.ndim not in (3, 4):
            raise ValueError(f"SegmentationGradCAMDebugger region='label' needs datapoint['labels']"
                             f"['{self.label_key}'] as a (B, H, W) class map or (B, K, H, W) masks; use "
                             "region='predicted' otherwise")
        target = target.to(logits.device)
        if target.ndim == 4 and target.shape[1] == logits.shape[1]:  # one mask per channel
            inside = target[:, self.target] > 0.5
        else:  # a class map
            classes = target.reshape(target.shape[0], *target.shape[-2:])
            inside = (classes == self.target) & (classes != self.ignore_index)
        resized = F.interpolate(inside[:, None].float(), size=logits.shape[-2:], mode="nearest")
        return resized[:, 0] > 0.5
