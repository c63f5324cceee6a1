"""GradCAMDebugger against a hand-written Grad-CAM, and the state it must leave alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from models import AttentionClassifier, SignalCNN, SmallCNN
from runners.eval_viewer.backend.initialization import load_debug_outputs
from tests.compat.architectures import TinyResNet
from tests.compat.references import captum_gradcam
from tests.debuggers.library import capture_epoch, entry, leftover_hooks, make_batch, run_batches
from utils.errors import ConfigError


@pytest.fixture
def model():
    torch.manual_seed(0)
    model = SmallCNN(widths=(4, 8, 8, 8))
    with torch.no_grad():  # non-trivial BatchNorm statistics, so eval mode matters
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 1.5)
    return model.eval()


@pytest.fixture
def images():
    torch.manual_seed(1)
    return torch.randn(6, 3, 16, 16)


def manual_gradcam(model, images, targets):
    """Grad-CAM written out: backbone activation as a leaf, head on top, gradient of the target logits."""
    with torch.enable_grad():
        activation = model.backbone(images).detach().requires_grad_()
        logits = model.head(activation)
        score = logits[torch.arange(len(images)), targets].sum()
        (grad,) = torch.autograd.grad(score, activation)
    cam = unnormalised_gradcam(grad, activation, images)
    peak = cam.amax(dim=(1, 2), keepdim=True)
    return torch.where(peak > 0, cam / peak, 0.0).numpy(), peak.flatten().numpy(), logits.detach()


def unnormalised_gradcam(grad, activation, images):
    """ReLU of the gradient-weighted channel sum, upsampled bilinearly to the images' size."""
    cam = torch.relu((grad.mean(dim=(2, 3), keepdim=True) * activation).sum(1)).detach()
    return F.interpolate(cam[:, None], size=images.shape[-2:], mode="bilinear", align_corners=False)[:, 0]


@pytest.mark.parametrize("target", ["predicted", "label", 4])
def test_cam_matches_a_hand_written_gradcam(model, images, tmp_path, target):
    labels = torch.tensor([0, 1, 2, 3, 4, 5])
    outputs = capture_epoch(model, images, tmp_path, 4,
                            [entry("cam", GradCAMDebugger, target_layer="backbone.layer4", target=target)],
                            labels=labels)
    with torch.no_grad():
        predicted = model({"image": images})["logits"].argmax(1)
    targets = {"predicted": predicted, "label": labels, 4: torch.full((6,), 4)}[target]
    cam, raw_max, logits = manual_gradcam(model, images, targets)
    for i in range(6):
        out = outputs[i]["cam"]
        assert out["kind"] == "cam" and out["target_layer"] == "backbone.layer4"
        assert out["target_class"] == int(targets[i])
        assert out["target_score"] == pytest.approx(float(logits[i, targets[i]]), rel=1e-5, abs=1e-6)
        assert out["cam"].shape == (16, 16)
        np.testing.assert_allclose(out["cam"], cam[i], rtol=1e-4, atol=1e-5)
        assert out["raw_max"] == pytest.approx(float(raw_max[i]), rel=1e-4, abs=1e-7)
        assert out["cam"].min() >= 0 and out["cam"].max() == pytest.approx(1.0 if raw_max[i] > 0 else 0.0)


def test_raw_max_is_what_the_cam_was_divided_by(model, tmp_path):
    """``cam × raw_max`` is the unnormalised cam, for the target and for the other target: raw_max is the
    upsampled cam's maximum, not the (8, 8) cam's, which is up to 3% larger here (a peak between pixel centres is
    smoothed by the upsampling; 10-20% on sharper cams)."""
    torch.manual_seed(1)
    images = torch.randn(6, 3, 64, 64)
    with torch.no_grad():
        predicted = model({"image": images})["logits"].argmax(1)
    labels = (predicted + torch.tensor([0, 1, 0, 2, 0, 3])) % 6
    outputs = capture_epoch(model, images, tmp_path, 6,
                            [entry("cam", GradCAMDebugger, target_layer="backbone.layer4")], labels=labels)
    activation = model.backbone(images).detach().requires_grad_()
    for targets, record in ((predicted, lambda out: out), (labels, lambda out: out["other_target"])):
        logits = model.head(activation)
        (grad,) = torch.autograd.grad(logits[torch.arange(6), targets].sum(), activation)
        expected = unnormalised_gradcam(grad, activation, images).numpy()
        for i in range(6):
            out = record(outputs[i]["cam"])
            if out is not None:
                np.testing.assert_allclose(out["cam"] * out["raw_max"], expected[i], rtol=1e-4, atol=1e-6)


def test_leaves_grads_mode_statistics_and_hooks_as_they_were(model, images):
    model.train()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    batch = make_batch(images, range(4))
    with torch.no_grad():  # as in the evaluation loop
        out = GradCAMDebugger("backbone.layer4")(batch, model)
    assert out["cam"].shape == (4, 16, 16)
    assert model.training and all(m.training for m in model.modules())
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())  # BatchNorm stats untouched
    assert leftover_hooks(model) == 0


def test_frozen_backbone_still_gets_a_cam(model, images):
    for p in model.backbone.parameters():
        p.requires_grad_(False)
    out = GradCAMDebugger("backbone.layer4")(make_batch(images, range(2)), model)
    assert out["raw_max"].shape == (2,) and all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("args, message", [
    ({"target_layer": "head.fc"}, "needs an output with positions from layer 'head.fc'"),
    ({"target_layer": "backbone.layer4", "target": 9}, "target class 9 does not exist: the model has 6 classes"),
    ({"target_layer": "backbone.layer4", "output_key": "scores"}, "needs the model output 'scores'"),
])
def test_user_mistakes_are_clear_recorded_errors(model, images, tmp_path, args, message):
    outputs = capture_epoch(model, images[:2], tmp_path, 2, [entry("cam", GradCAMDebugger, **args)])
    assert outputs[0]["cam"]["kind"] == "error"
    assert message in outputs[0]["cam"]["message"]
    assert leftover_hooks(model) == 0


def test_label_target_without_labels_says_what_to_do(model, images):
    batch = make_batch(images, range(2))
    batch["labels"] = {}
    with pytest.raises(ValueError, match=r"target='label' needs datapoint\['labels'\]\['class'\]"):
        GradCAMDebugger("backbone.layer4", target="label")(batch, model)


@pytest.mark.parametrize("target", ["best", -1, 1.5, True])
def test_bad_target_is_a_config_error(target):
    with pytest.raises(ConfigError, match="target must be"):
        GradCAMDebugger("backbone.layer4", target=target)


@pytest.mark.parametrize("frozen_backbone", [False, True])
@pytest.mark.parametrize("layer", ["layer2.bn1", "layer1.bn2", "layer2.conv2", "layer1"])
def test_in_place_ops_after_the_layer_and_frozen_layers_below_match_captum(tmp_path, layer, frozen_backbone):
    """bn1 feeds ReLU(inplace=True) and bn2 feeds `out += identity`: A must be the layer's own output."""
    torch.manual_seed(0)
    model = TinyResNet(frozen_backbone=frozen_backbone).eval()
    images = torch.randn(4, 3, 12, 12)
    outputs = capture_epoch(model, images, tmp_path, 4, [entry("cam", GradCAMDebugger, target_layer=layer)])
    with torch.no_grad():
        targets = model({"image": images})["logits"].argmax(1)
    cam, raw_max = captum_gradcam(model, layer, {"image": images}, targets)
    for i in range(4):
        np.testing.assert_allclose(outputs[i]["cam"]["cam"], cam[i].numpy(), rtol=1e-4, atol=1e-5)
        assert outputs[i]["cam"]["raw_max"] == pytest.approx(float(raw_max[i]), rel=1e-4, abs=1e-9)
    assert all(p.grad is None for p in model.parameters())


def test_the_evaluation_forward_pass_is_reused_and_its_caller_sees_no_graph(model, images, tmp_path):
    calls = []
    model.register_forward_pre_hook(lambda module, args: calls.append(torch.is_grad_enabled()))
    debugger = SequentialDebugger([entry("cam", GradCAMDebugger, target_layer="backbone.layer4")], model=model)
    debugger.reset_buffer(str(tmp_path / "debugger"))
    debugger.enabled = True
    with torch.no_grad():  # the evaluation loop
        for start in (0, 3):
            dp = make_batch(images, range(start, start + 3))
            dp["outputs"] = model(dp["inputs"])
            assert not torch.is_grad_enabled() and not dp["outputs"]["logits"].requires_grad  # as without capture
            debugger(dp, model)
    debugger.save_all(str(tmp_path / "debugger"))
    debugger.close()
    assert calls == [False, False]  # two batches, one forward pass each: none more for Grad-CAM
    outputs = load_debug_outputs(str(tmp_path))
    with torch.no_grad():
        targets = model({"image": images})["logits"].argmax(1)
    cam, raw_max = captum_gradcam(model, "backbone.layer4", {"image": images}, targets)
    for i in range(6):
        np.testing.assert_allclose(outputs[i]["cam"]["cam"], cam[i].numpy(), rtol=1e-4, atol=1e-5)
        assert outputs[i]["cam"]["raw_max"] == pytest.approx(float(raw_max[i]), rel=1e-4)
    assert leftover_hooks(model) == 1  # the test's own counter


def test_an_inference_mode_loop_keeps_its_forward_pass(model, images):
    """No graph can be recorded under torch.inference_mode(): the model's forward must still run untouched."""
    debugger = SequentialDebugger([entry("cam", GradCAMDebugger, target_layer="backbone.layer4")], model=model)
    debugger.reset_buffer()
    debugger.enabled = True
    with torch.inference_mode():
        dp = make_batch(images, range(3))
        dp["outputs"] = model(dp["inputs"])
        expected = model.head(model.backbone(dp["inputs"]["image"]))
        torch.testing.assert_close(dp["outputs"]["logits"], expected)
        output = debugger(dp, model)["cam"]  # recorded, not raised into the loop
        assert output["kind"] == "error" and "run the evaluation loop under torch.no_grad()" in output["message"]
    debugger.close()


@pytest.mark.parametrize("target", ["predicted", "label"])
def test_label_and_prediction_both_get_a_cam_that_matches_captum_where_they_differ(model, images, tmp_path, target):
    with torch.no_grad():
        predicted = model({"image": images})["logits"].argmax(1)
    labels = predicted.clone()
    labels[[1, 4]] = (predicted[[1, 4]] + 1) % 6  # two wrong predictions in the batch
    outputs = capture_epoch(model, images, tmp_path, 6,
                            [entry("cam", GradCAMDebugger, target_layer="backbone.layer4", target=target)],
                            labels=labels)
    by_label, label_max = captum_gradcam(model, "backbone.layer4", {"image": images}, labels)
    by_prediction, prediction_max = captum_gradcam(model, "backbone.layer4", {"image": images}, predicted)
    first, second = (by_prediction, by_label) if target == "predicted" else (by_label, by_prediction)
    first_max, second_max = (prediction_max, label_max) if target == "predicted" else (label_max, prediction_max)
    for i in range(6):
        out = outputs[i]["cam"]
        assert out["label_class"] == int(labels[i]) and out["predicted_class"] == int(predicted[i])
        np.testing.assert_allclose(out["cam"], first[i].numpy(), rtol=1e-4, atol=1e-5)
        other = out["other_target"]
        if i not in (1, 4):
            assert other is None
            continue
        assert other["target_class"] == int((labels if target == "predicted" else predicted)[i])
        assert other["target_class"] != out["target_class"]
        np.testing.assert_allclose(other["cam"], second[i].numpy(), rtol=1e-4, atol=1e-5)
        assert other["raw_max"] == pytest.approx(float(second_max[i]), rel=1e-4, abs=1e-7)
        assert out["raw_max"] == pytest.approx(float(first_max[i]), rel=1e-4, abs=1e-7)
    assert all(p.grad is None for p in model.parameters())


def test_both_targets_in_a_batch_equal_each_datapoint_alone(model, images, tmp_path):
    with torch.no_grad():
        labels = (model({"image": images})["logits"].argmax(1) + torch.tensor([0, 1, 0, 2, 0, 3])) % 6
    debuggers = [entry("cam", GradCAMDebugger, target_layer="backbone.layer4")]
    batched = capture_epoch(model, images, tmp_path / "batched", 6, debuggers, labels=labels)
    alone = capture_epoch(model, images, tmp_path / "alone", 1, debuggers, labels=labels)
    for i in range(6):
        together, single = batched[i]["cam"], alone[i]["cam"]
        np.testing.assert_allclose(together["cam"], single["cam"], rtol=1e-5, atol=1e-6)
        assert (together["other_target"] is None) == (single["other_target"] is None) == (i in (0, 2, 4))
        if together["other_target"] is not None:
            np.testing.assert_allclose(together["other_target"]["cam"], single["other_target"]["cam"],
                                       rtol=1e-5, atol=1e-6)
            assert together["other_target"]["target_score"] == pytest.approx(single["other_target"]["target_score"],
                                                                            rel=1e-5)


def test_a_fixed_class_target_has_no_other_target(model, images):
    out = GradCAMDebugger("backbone.layer4", target=2)(make_batch(images, range(3)), model)
    assert "other_target" not in out and out["label_class"].tolist() == [0, 1, 2]


def test_two_grad_cam_debuggers_on_one_layer_share_the_forward_pass(model, images, tmp_path):
    """As in the all-debuggers example: one for the prediction, one for the label, both on backbone.layer4."""
    labels = torch.tensor([0, 1, 2, 3, 4, 5])
    outputs = capture_epoch(model, images, tmp_path, 6, [
        entry("predicted", GradCAMDebugger, target_layer="backbone.layer4"),
        entry("label", GradCAMDebugger, target_layer="backbone.layer4", target="label")], labels=labels)
    with torch.no_grad():
        predicted = model({"image": images})["logits"].argmax(1)
    for name, targets in (("predicted", predicted), ("label", labels)):
        cam, raw_max = captum_gradcam(model, "backbone.layer4", {"image": images}, targets)
        for i in range(6):
            out = outputs[i][name]
            assert out["kind"] == "cam", out.get("message")
            np.testing.assert_allclose(out["cam"], cam[i].numpy(), rtol=1e-4, atol=1e-5)
    assert all(p.grad is None for p in model.parameters())


def normalised(cam: torch.Tensor) -> np.ndarray:
    peak = cam.flatten(1).amax(dim=1).view(-1, *[1] * (cam.ndim - 1))
    return torch.where(peak > 0, cam / peak, 0.0).numpy()


def test_a_conv1d_layer_gets_a_cam_over_the_signal(tmp_path):
    """Grad-CAM of a Conv1d stage (B, C, t), linearly upsampled to the signal's length, against one written out."""
    torch.manual_seed(0)
    model = SignalCNN(num_classes=4).eval()
    signals = torch.randn(6, 1, 64)
    batches = [{"inputs": {"signal": signals[rows]}, "labels": {"class": torch.tensor(rows) % 4},
                "meta_info": {"idx": torch.tensor(rows)}} for rows in ([0, 1, 2, 3], [4, 5])]
    outputs = run_batches(model, batches, tmp_path, [entry("cam", GradCAMDebugger, target_layer="backbone.stage3",
                                                           input_key="signal")])[1]
    with torch.enable_grad():
        activation = model.backbone(signals).detach().requires_grad_()
        logits = model.head(activation)
        (grad,) = torch.autograd.grad(logits.max(dim=1).values.sum(), activation)
    cam = torch.relu((grad.mean(dim=2, keepdim=True) * activation).sum(1)).detach()
    expected = normalised(F.interpolate(cam[:, None], size=64, mode="linear", align_corners=False)[:, 0])
    for i in range(6):
        assert outputs[i]["cam"]["cam"].shape == (64,)
        np.testing.assert_allclose(outputs[i]["cam"]["cam"], expected[i], rtol=1e-4, atol=1e-5)
        assert set(outputs[i]["cam"]["spatial"]) == {"centroid_x", "centre_fraction", "spread", "entropy"}


def test_a_transformer_block_gets_a_cam_over_its_real_tokens(tmp_path):
    """Grad-CAM of a block's tokens (B, T, D): the unit weights averaged over the real tokens, none on padding."""
    torch.manual_seed(0)
    model = AttentionClassifier(num_classes=3, dim=16, depth=2, num_heads=2, vocab_size=20).eval()
    lengths = torch.tensor([9, 4, 6, 2])
    real = torch.arange(9)[None] < lengths[:, None]
    tokens = torch.randint(1, 20, (4, 9)) * real
    batch = {"inputs": {"tokens": tokens, "attention_mask": real.long()}, "labels": {"class": torch.zeros(4).long()},
             "meta_info": {"idx": torch.arange(4)}}
    outputs = run_batches(model, [batch], tmp_path, [entry("cam", GradCAMDebugger, target_layer="blocks.1",
                                                           input_key="tokens")])[1]
    with torch.enable_grad():
        x, grid, padding = model._embedded(batch["inputs"])
        activation = model.blocks[1](model.blocks[0](x, grid, padding), grid, padding).detach().requires_grad_()
        logits = model.head(model.pool(model.norm(activation), padding))
        (grad,) = torch.autograd.grad(logits.max(dim=1).values.sum(), activation)
    weights = (grad * real[..., None]).sum(1) / lengths[:, None]
    expected = normalised(torch.relu((weights[:, None] * activation).sum(2)).detach() * real)
    for i in range(4):
        np.testing.assert_allclose(outputs[i]["cam"]["cam"], expected[i], rtol=1e-4, atol=1e-5)
        assert not outputs[i]["cam"]["cam"][int(lengths[i]):].any()
