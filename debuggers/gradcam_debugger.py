"""``GradCAMDebugger``: Grad-CAM heatmaps (Selvaraju et al., 2017), one per datapoint."""

from __future__ import annotations

import math
from typing import Any, Optional, Union

import numpy as np
import torch
import torch.nn.functional as F

from debuggers.base_debugger import BaseDebugger
from debuggers.model_runs import eval_mode, output_tensor
from debuggers.outputs import KIND_CAM
from debuggers.tensor_utils import describe, to_numpy
from debuggers.utils import require_layer
from utils.errors import ConfigError

Target = Union[str, int]
_NAMED_TARGETS = ("predicted", "label")


class GradCAMDebugger(BaseDebugger):
    """Which pixels raised each datapoint's target class score, seen from ``target_layer``.

    The debugger reruns the model's forward on ``datapoint['inputs']`` with gradients
    on (even inside the evaluation loop's ``torch.no_grad()``), in eval mode, with a
    temporary hook on ``target_layer``. For activations A (B, C, h, w) and the
    target logits y (one per datapoint):

        w_c = mean over (h, w) of dy/dA_c,   cam = ReLU(sum_c w_c A_c)

    upsampled bilinearly to the input image size and divided by its maximum per
    datapoint (an all-zero cam stays zero). Gradients are taken with
    ``torch.autograd.grad`` w.r.t. A only: no parameter's ``.grad`` is touched.

    Args:
        target_layer: a layer whose output is a (B, C, h, w) map, e.g. ``backbone.layer4``.
        target: ``'predicted'`` (argmax of the logits), ``'label'`` (``labels[label_key]``)
            or a class index.
        output_key: key of the (B, K) logits in the model's output dict (None: the output itself).
        input_key: key of the image in ``inputs``; its (H, W) is the cam's size.
        label_key: key of the class labels, for ``target='label'``.

    Output ``{'kind': 'cam', 'cam': (B, H, W), 'target_class': (B,), 'target_score': (B,),
    'target_layer', 'raw_max': (B,)}`` where ``raw_max`` is the cam's maximum before
    upsampling and normalisation (how strong the evidence is).
    """

    runs_model = True

    def __init__(self, target_layer: str, target: Target = "predicted", output_key: Optional[str] = "logits",
                 input_key: str = "image", label_key: str = "class") -> None:
        if not (target in _NAMED_TARGETS or (isinstance(target, int) and not isinstance(target, bool)
                                             and target >= 0)):
            raise ConfigError(f"GradCAMDebugger target must be 'predicted', 'label' or a class index >= 0, "
                              f"got {target!r}")
        self.target_layer = target_layer
        self.target = target
        self.output_key = output_key
        self.input_key = input_key
        self.label_key = label_key

    def layer_names(self) -> list[str]:
        return [self.target_layer]

    def __call__(self, datapoint: dict[str, Any], model: torch.nn.Module) -> dict[str, Any]:
        with torch.enable_grad():
            activations, logits = self._forward(datapoint, model)
            targets = self._targets(datapoint, logits)
            scores = logits.gather(1, targets[:, None]).squeeze(1)
            (gradients,) = torch.autograd.grad(scores.sum(), activations)
        weights = gradients.mean(dim=(2, 3), keepdim=True)
        cam = F.relu((weights * activations).sum(dim=1)).detach()
        raw_max = cam.amax(dim=(1, 2))
        cam = self._upsample(cam, datapoint)
        peak = cam.amax(dim=(1, 2), keepdim=True)
        return {
            "kind": KIND_CAM,
            "cam": torch.where(peak > 0, cam / peak, 0.0),
            "target_class": targets,
            "target_score": scores.detach(),
            "target_layer": self.target_layer,
            "raw_max": raw_max,
        }

    def summary(self, output: dict[str, Any]) -> dict[str, float]:
        """Where the cam's mass lies and how spread it is, with the target's score.

        The cam, taken as a distribution over the image (coordinates in [0, 1], x across, y down):
        its centroid, the share of its mass in the central box (the middle half of each side),
        its spread (root mean squared distance from the centroid) and its entropy divided by
        log(H W) (1: uniform, 0: one pixel). All nan for an all-zero cam.
        """
        cam = to_numpy(output["cam"])
        scores = {key: float(to_numpy(output[key])) for key in ("target_score", "raw_max", "target_class")}
        total = cam.sum()
        if not total > 0:
            return {**scores, **dict.fromkeys(("centroid_x", "centroid_y", "centre_fraction", "spread", "entropy"),
                                              math.nan)}
        p = cam / total
        h, w = p.shape
        ys, xs = (np.arange(h) + 0.5) / h, (np.arange(w) + 0.5) / w
        cy, cx = float(p.sum(1) @ ys), float(p.sum(0) @ xs)
        spread = math.sqrt(float((p * ((ys[:, None] - cy) ** 2 + (xs[None, :] - cx) ** 2)).sum()))
        entropy = float(-(p[p > 0] * np.log(p[p > 0])).sum() / math.log(h * w)) if h * w > 1 else 0.0
        centre = float(p[h // 4:h - h // 4, w // 4:w - w // 4].sum())
        return {**scores, "centroid_x": cx, "centroid_y": cy, "centre_fraction": centre, "spread": spread,
                "entropy": entropy}

    def _forward(self, datapoint: dict[str, Any], model: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        """Rerun the model (grad enabled by the caller); return the target layer's activations and the logits."""
        layer = require_layer(model, self.target_layer)
        kept: list[Any] = []

        def keep(module: torch.nn.Module, args: Any, output: Any) -> Any:
            if not (isinstance(output, torch.Tensor) and output.ndim == 4):
                kept.append(output)
                return None
            if not output.requires_grad:  # frozen layers below: start the graph here
                output = output.detach().requires_grad_()
            kept.append(output)
            # the model goes on with a copy, as captum's LayerGradCam does: an in-place op next
            # (ReLU(inplace=True), out += identity) then changes the copy, never the kept A
            return output.clone()

        handle = layer.register_forward_hook(keep)
        try:
            with eval_mode(model):
                logits = output_tensor(model(datapoint["inputs"]), self.output_key, "GradCAMDebugger")
        finally:
            handle.remove()
        if not kept:
            raise RuntimeError(f"layer '{self.target_layer}' did not run in the model's forward pass; "
                               "pick a layer on the path from the input to the logits")
        activations = kept[-1]
        if not isinstance(activations, torch.Tensor) or activations.ndim != 4:
            raise TypeError(f"GradCAMDebugger needs a (B, C, h, w) map from layer '{self.target_layer}', "
                            f"which returned {describe(activations)}; pick a convolutional layer")
        if not logits.requires_grad:
            raise RuntimeError(f"the logits do not depend on layer '{self.target_layer}' through differentiable "
                               "operations; pick a layer on the path from the input to the logits")
        return activations, logits

    def _targets(self, datapoint: dict[str, Any], logits: torch.Tensor) -> torch.Tensor:
        batch, num_classes = logits.shape
        if self.target == "predicted":
            return logits.detach().argmax(dim=1)
        if self.target == "label":
            labels = datapoint.get("labels")
            labels = labels.get(self.label_key) if isinstance(labels, dict) else None
            if not isinstance(labels, torch.Tensor):
                raise ValueError(f"GradCAMDebugger target='label' needs datapoint['labels']['{self.label_key}'] "
                                 "as a (B,) tensor of class indices; use target='predicted' otherwise")
            return labels.reshape(batch).to(device=logits.device, dtype=torch.long)
        if self.target >= num_classes:
            raise ValueError(f"GradCAMDebugger target class {self.target} does not exist: the model has "
                             f"{num_classes} classes (0..{num_classes - 1})")
        return torch.full((batch,), self.target, dtype=torch.long, device=logits.device)

    def _upsample(self, cam: torch.Tensor, datapoint: dict[str, Any]) -> torch.Tensor:
        image = datapoint["inputs"].get(self.input_key) if isinstance(datapoint["inputs"], dict) else None
        if not isinstance(image, torch.Tensor) or image.ndim != 4:
            return cam
        return F.interpolate(cam[:, None], size=image.shape[-2:], mode="bilinear", align_corners=False)[:, 0]
