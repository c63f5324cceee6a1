"""Every ready-made debugger: the same per-datapoint outputs whatever the batch size, nothing left behind."""

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
from debuggers.outputs import KIND_FIELDS
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from models import AttentionClassifier, SmallCNN
from tests.debuggers.library import capture_epoch, entry, leftover_hooks, make_batch

CNN = [entry("feature_map", FeatureMapDebugger, layer_name="backbone.layer3", max_channels=4),
       entry("statistics", ActivationStatsDebugger, layer_name="backbone.layer2"),
       entry("layer_output", LayerOutputDebugger, layer_name="backbone.layer1", downsample_factor=2),
       entry("cam", GradCAMDebugger, target_layer="backbone.layer4", target="label"),
       entry("nan_origin", NaNInfDebugger),
       entry("gradient_flow", GradientFlowDebugger)]
ATTENTION = [entry("attention", AttentionDebugger, layer_name="blocks.1.attn"),
             entry("captured_states", CaptureDebugger),
             entry("cam", GradCAMDebugger, target_layer="patch_embed"),
             entry("gradient_flow", GradientFlowDebugger, layer_types=["Linear"])]


def build(name):
    torch.manual_seed(0)
    if name == "cnn":
        return SmallCNN(widths=(4, 4, 8, 8)).eval(), CNN
    return AttentionClassifier(patch_size=4, dim=16, depth=2, num_heads=2).eval(), ATTENTION


def assert_same(a, b, path=""):
    if isinstance(a, np.ndarray):
        assert a.shape == b.shape and a.dtype == b.dtype, path
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=path)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            assert_same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-4, abs=1e-5, nan_ok=True), path
    else:
        assert a == b, path


@pytest.mark.parametrize("name", ["cnn", "attention"])
def test_batch_1_and_8_give_the_same_outputs(name, tmp_path):
    model, debuggers = build(name)
    torch.manual_seed(1)
    images = torch.randn(8, 3, 16, 16)
    one = capture_epoch(model, images, tmp_path / "one", 1, debuggers)
    eight = capture_epoch(model, images, tmp_path / "eight", 8, debuggers)
    for i in range(8):
        for debugger in one[i]:
            assert one[i][debugger]["kind"] in KIND_FIELDS and one[i][debugger]["kind"] not in ("error", "not_run")
        assert_same(one[i], eight[i], f"idx {i}")
    assert leftover_hooks(model) == 0


@pytest.mark.parametrize("name", ["cnn", "attention"])
def test_enabled_debuggers_change_nothing_the_model_computes_or_keeps(name):
    model, debuggers = build(name)
    images = torch.randn(4, 3, 16, 16)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        plain = model({"image": images})["logits"]
    debugger = SequentialDebugger(debuggers, model=model)
    debugger.reset_buffer()
    for _ in range(2):  # enable/disable twice: hooks never stack up
        debugger.enabled = True
        assert leftover_hooks(model) > 0
        with torch.no_grad():
            batch = make_batch(images, range(4))
            batch["outputs"] = model(batch["inputs"])
            debugger(batch, model)
        torch.testing.assert_close(batch["outputs"]["logits"], plain)
        debugger.enabled = False
        assert leftover_hooks(model) == 0
    debugger.close()
    assert not model.training and all(p.grad is None for p in model.parameters())
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
