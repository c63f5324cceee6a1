"""Segmentation models a user brings (a torchvision-style U-Net, Hugging Face's SegFormer): Grad-CAM of a class
region against captum on the same region score, attention against the model's own, feature maps and the mask
figures' outputs, every datapoint batched equal to alone, through real SequentialDebugger epochs and pages."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from captum.attr import LayerGradCam

from debuggers.attention_debugger import AttentionDebugger
from debuggers.feature_map_debugger import FeatureMapDebugger
from debuggers.mask_debugger import MaskDebugger
from debuggers.segmentation_gradcam_debugger import SegmentationGradCAMDebugger
from debuggers.utils import require_layer
from runners.eval_viewer.figures.context import DrawContext
from runners.eval_viewer.figures.registry import output_figures
from tests.compat import huggingface as hf
from tests.compat.harness import alone, assert_same_outputs, capture
from tests.compat.segmentation_models import NUM_CLASSES, class_map_batches, segformer, unet
from tests.debuggers.library import entry
from tests.runs import one_thread

MODELS = {"unet": (unet, "model.dec2"), "segformer": (segformer, "model.decode_head.linear_fuse")}



@pytest.fixture(autouse=True)
def single_thread():
    with one_thread():
        yield

def region_gradcam(model, layer_name, images, labels, target, region):
    """captum's LayerGradCam of ``layer_name`` for the score ``sum over the region of logits[target]``, upsampled to
    the image and divided by its maximum, and that maximum."""
    def score(image):
        logits = model({"image": image})["logits"]
        if region == "label":
            inside = F.interpolate((labels == target)[:, None].float(), size=logits.shape[-2:], mode="nearest")[:, 0]
        else:
            inside = (logits.detach().argmax(dim=1) == target).float()
        return (logits[:, target] * inside).sum(dim=(1, 2))

    raw = LayerGradCam(score, require_layer(model, layer_name)).attribute(images, relu_attributions=True).detach()
    cam = F.interpolate(raw, size=images.shape[-2:], mode="bilinear", align_corners=False)[:, 0]
    peak = cam.amax(dim=(1, 2), keepdim=True)
    return torch.where(peak > 0, cam / peak, 0.0), peak[:, 0, 0]


@pytest.mark.parametrize("name", MODELS)
def test_user_segmentation_models(tmp_path, name):
    build, layer = MODELS[name]
    model = build()
    torch.manual_seed(3)
    images = torch.randn(4, 3, 32, 32)
    labels = torch.randint(0, NUM_CLASSES, (4, 32, 32))
    labels[:, :4] = 255  # ignored pixels
    batches = class_map_batches(images, labels, 4)
    debuggers = [entry("cam_label", SegmentationGradCAMDebugger, target_layer=layer, target_class=1, region="label"),
                 entry("cam_predicted", SegmentationGradCAMDebugger, target_layer=layer, target_class=2),
                 entry("features", FeatureMapDebugger, layer_name=layer, max_channels=4),
                 entry("masks", MaskDebugger, output_key="logits", point_key=None)]
    if name == "segformer":
        debuggers.append(entry("attention", AttentionDebugger,
                               layer_name="model.segformer.stages.0.blocks.0.attention"))
    batched = capture(model, batches, tmp_path / "batched", debuggers)
    for key, region, target in (("cam_label", "label", 1), ("cam_predicted", "predicted", 2)):
        cam, raw_max = region_gradcam(model, layer, images, labels, target, region)
        for i in range(4):
            np.testing.assert_allclose(batched[i][key]["cam"], cam[i].numpy(), rtol=1e-4, atol=1e-5)
            assert batched[i][key]["raw_max"] == pytest.approx(float(raw_max[i]), rel=1e-4, abs=1e-7)
    with torch.no_grad():
        logits = model({"image": images})["logits"]
    upsampled = F.interpolate(logits, size=(32, 32), mode="bilinear", align_corners=False)
    for i in range(4):
        np.testing.assert_array_equal(batched[i]["masks"]["label_mask"][0], labels[i].numpy())
        np.testing.assert_array_equal(batched[i]["masks"]["predicted_mask"][0], upsampled[i].argmax(dim=0).numpy())
        assert batched[i]["cam_predicted"]["region_pixels"] == int((logits[i].argmax(dim=0) == 2).sum())
    if name == "segformer":
        own = hf.eager_attentions(model, {"pixel_values": images})[0]
        for i in range(4):  # (heads, 256 queries, 64 keys: the first stage reduces its keys 2x a side)
            np.testing.assert_allclose(batched[i]["attention"]["attention"], own[i].numpy(), rtol=1e-4, atol=1e-6)
    figures = output_figures(batched[0]["masks"], DrawContext(image=images[0].numpy()))
    assert figures[0].layout.updatemenus and figures[1].data[0].y[0] == pytest.approx(batched[0]["masks"]["iou"])
    assert_same_outputs(batched, capture(model, alone(batches), tmp_path / "alone", debuggers))
