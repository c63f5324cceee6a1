"""Architectures built in the tests (a torchvision-style ResNet, its frozen-backbone variant, a
sequence-first LSTM/MultiheadAttention model) through real epochs: every ready-made debugger, a user's
ForwardDebugger and capture points, checked against independent computations and "batched equals alone"."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from debuggers.activation_stats_debugger import ActivationStatsDebugger
from debuggers.attention_debugger import AttentionDebugger
from debuggers.capture_debugger import CaptureDebugger
from debuggers.feature_map_debugger import FeatureMapDebugger
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.gradient_flow_debugger import GradientFlowDebugger
from debuggers.layer_output_debugger import LayerOutputDebugger
from debuggers.nan_inf_debugger import NaNInfDebugger
from tests.compat.architectures import SeqFirstClassifier, TinyResNet
from tests.compat.harness import ChannelEnergy, alone, assert_same_outputs, capture, check_flops, entry
from tests.compat.references import captum_gradcam

RESNET_DEBUGGERS = [
    entry("cam_bn2", GradCAMDebugger, target_layer="layer2.bn2"),  # feeds `out += identity`
    entry("cam_bn1", GradCAMDebugger, target_layer="layer1.bn1"),  # feeds ReLU(inplace=True)
    entry("features", FeatureMapDebugger, layer_name="layer1"),
    entry("stats", ActivationStatsDebugger, layer_name="layer2.bn1"),
    entry("output", LayerOutputDebugger, layer_name="layer1", downsample_factor=2),
    entry("user", ChannelEnergy, layer_name="layer2.conv1"),
    entry("captured", CaptureDebugger),
    entry("gradients", GradientFlowDebugger),
    entry("nan", NaNInfDebugger),
]


def image_batches(images, batch_size):
    return [{"inputs": {"image": images[s:s + batch_size]}, "labels": {"class": torch.arange(s, s + batch_size) % 5},
             "meta_info": {"idx": torch.arange(s, s + batch_size)}} for s in range(0, len(images), batch_size)]


def per_datapoint_grad_norm(model, images, labels, name):
    """The gradient norm of one layer's parameters for each datapoint's own cross-entropy."""
    norms = []
    for image, label in zip(images, labels):
        with torch.enable_grad():
            loss = torch.nn.functional.cross_entropy(model({"image": image[None]})["logits"], label[None])
            params = [p for p in dict(model.named_modules())[name].parameters(recurse=False) if p.requires_grad]
            grads = torch.autograd.grad(loss, params)
        norms.append(float(torch.sqrt(sum(g.double().pow(2).sum() for g in grads))))
    return norms


@pytest.mark.parametrize("frozen_backbone", [False, True], ids=["resnet", "frozen-backbone"])
def test_resnet_block_stack(tmp_path, frozen_backbone):
    torch.manual_seed(0)
    model = TinyResNet(frozen_backbone=frozen_backbone).eval()
    images = torch.randn(4, 3, 12, 12)
    batches = image_batches(images, 4)
    batched = capture(model, batches, tmp_path / "batched", RESNET_DEBUGGERS)
    with torch.no_grad():
        logits = model({"image": images})["logits"]
        layer1 = model.layer1(model.stem(images))
        pooled = model.layer2(layer1).mean(dim=(2, 3))
    for name, layer in (("cam_bn2", "layer2.bn2"), ("cam_bn1", "layer1.bn1")):
        cam, raw_max = captum_gradcam(model, layer, {"image": images}, logits.argmax(1))
        for i in range(4):
            np.testing.assert_allclose(batched[i][name]["cam"], cam[i].numpy(), rtol=1e-4, atol=1e-5)
            assert batched[i][name]["raw_max"] == pytest.approx(float(raw_max[i]), rel=1e-4)
    fc_norms = per_datapoint_grad_norm(model, images, torch.arange(4) % 5, "fc")
    for i in range(4):
        np.testing.assert_allclose(batched[i]["features"]["feature_map"], layer1[i].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(batched[i]["captured"]["states"]["head"]["embedding"]["data"], pooled[i].numpy(),
                                   rtol=1e-5, atol=1e-6)
        gradients = batched[i]["gradients"]
        assert gradients["grad_norms"][gradients["layers"].index("fc")] == pytest.approx(fc_norms[i], rel=1e-4)
        assert [gradients["layers"][j] for j, frozen in enumerate(gradients["frozen"]) if not frozen] == (
            ["fc"] if frozen_backbone else gradients["layers"])
        assert batched[i]["nan"]["first_module"] is None
    assert_same_outputs(batched, capture(model, alone(batches), tmp_path / "alone", RESNET_DEBUGGERS))
    check_flops(model, {"image": images[:1]})


def test_sequence_first_lstm_and_attention(tmp_path):
    torch.manual_seed(0)
    model = SeqFirstClassifier().eval()
    tokens = torch.randint(1, 20, (4, 4))  # L == B: sizes cannot tell the batch dimension
    tokens[1, 2:] = 0  # padding
    tokens[3] = 0  # all padding: NaN from the attention for this datapoint alone
    batches = [{"inputs": {"tokens": tokens}, "labels": {"class": torch.tensor([0, 1, 2, 0])},
                "meta_info": {"idx": torch.arange(4)}}]
    debuggers = [entry("attention", AttentionDebugger, layer_name="attn"),
                 entry("nan", NaNInfDebugger, batch_dims={"norm": 1}),
                 entry("captured", CaptureDebugger),
                 entry("stats", ActivationStatsDebugger, layer_name="head"),
                 entry("embedded", LayerOutputDebugger, layer_name="embed", downsample_factor=1),
                 entry("user", ChannelEnergy, layer_name="embed"),
                 entry("gradients", GradientFlowDebugger)]
    batched = capture(model, batches, tmp_path / "batched", debuggers)
    with torch.no_grad():
        x = model.embed(tokens).transpose(0, 1)
        states, _ = model.lstm(x)
        _, weights = model.attn(states, states, states, key_padding_mask=tokens == 0, average_attn_weights=False)
    for i in range(3):
        real = int((tokens[i] != 0).sum())
        np.testing.assert_allclose(batched[i]["attention"]["attention"], weights[i, :, :real, :real].numpy(),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(batched[i]["captured"]["states"]["lstm"]["states"]["data"],
                                   states[:, i].numpy(), rtol=1e-5, atol=1e-6)
        assert batched[i]["nan"]["first_module"] is None
    assert batched[3]["nan"]["first_module"] == "attn"
    assert_same_outputs(batched, capture(model, alone(batches), tmp_path / "alone", debuggers))
    check_flops(model, {"tokens": tokens[:1]})
