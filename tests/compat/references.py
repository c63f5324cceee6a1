"""Independent computations the compatibility suite checks Lantern against."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from captum.attr import LayerGradCam

from debuggers.utils import require_layer


def captum_gradcam(model: torch.nn.Module, layer_name: str, inputs: dict, targets: torch.Tensor,
                   input_key: str = "image", output_key: str = "logits") -> tuple[torch.Tensor, torch.Tensor]:
    """captum's LayerGradCam of ``layer_name``: (cam upsampled to the image and divided by its max, that max)."""
    def logits_of(image: torch.Tensor) -> torch.Tensor:
        output = model({**inputs, input_key: image})
        return output[output_key] if output_key is not None else output

    image = inputs[input_key]
    raw = LayerGradCam(logits_of, require_layer(model, layer_name)).attribute(
        image, target=targets, relu_attributions=True).detach()[:, 0]
    cam = F.interpolate(raw[:, None], size=image.shape[-2:], mode="bilinear", align_corners=False)[:, 0]
    peak = cam.amax(dim=(1, 2), keepdim=True)
    return torch.where(peak > 0, cam / peak, 0.0), peak.flatten()


def assert_gradcam_matches_captum(batched: dict, model: torch.nn.Module, layer_name: str, images: torch.Tensor,
                                  input_key: str = "pixel_values") -> None:
    """Each datapoint's ``cam`` record equals captum's Grad-CAM of ``layer_name`` for the predicted class."""
    with torch.no_grad():
        targets = model({input_key: images})["logits"].argmax(1)
    cam, raw_max = captum_gradcam(model, layer_name, {input_key: images}, targets, input_key=input_key)
    for i in range(len(images)):
        np.testing.assert_allclose(batched[i]["cam"]["cam"], cam[i].numpy(), rtol=1e-4, atol=1e-5)
        assert batched[i]["cam"]["raw_max"] == pytest.approx(float(raw_max[i]), rel=1e-4)
