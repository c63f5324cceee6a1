"""GradientFlowDebugger against torch.autograd.grad per datapoint, and its flags."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from debuggers.gradient_flow_debugger import GradientFlowDebugger, below_rounding
from models import SmallCNN
from tests.debuggers.library import capture_epoch, entry, leftover_hooks, make_batch


class Flagged(nn.Module):
    """``used`` gets gradients, ``dead`` is multiplied by zero, ``unused`` never runs, ``frozen`` is frozen."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.used = nn.Linear(12, 6)
        self.dead = nn.Linear(12, 6)
        self.unused = nn.Linear(12, 6)
        self.frozen = nn.Linear(12, 12)
        self.frozen.requires_grad_(False)

    def forward(self, inputs):
        x = self.frozen(inputs["image"].flatten(1)[:, :12])
        return {"logits": self.used(x) + 0 * self.dead(x)}


class FlaggedWithItem(Flagged):
    """Flagged, but reading a value with .item(): vmap cannot run it, so the flags come from the loop."""

    def forward(self, inputs):
        self.largest = inputs["image"].abs().max().item()
        return super().forward(inputs)


def expected_norms(model, images, labels, layers):
    """Per datapoint: its own cross-entropy, autograd.grad w.r.t. each layer's parameters, Euclidean norm."""
    modules = dict(model.named_modules())
    rows = []
    for i in range(len(images)):
        with torch.enable_grad():
            loss = F.cross_entropy(model({"image": images[i:i + 1]})["logits"], labels[i:i + 1])
            row = []
            for name in layers:
                params = list(modules[name].parameters(recurse=False))
                grads = torch.autograd.grad(loss, params, retain_graph=True)
                row.append(float(torch.sqrt(sum((g.double() ** 2).sum() for g in grads))))
        rows.append(row)
    return np.array(rows)


def test_norms_match_autograd_per_datapoint(tmp_path):
    torch.manual_seed(0)
    model = SmallCNN(widths=(4, 4, 8, 8)).eval()
    images, labels = torch.randn(5, 3, 16, 16), torch.tensor([0, 1, 2, 3, 4])
    outputs = capture_epoch(model, images, tmp_path, 3, [entry("gf", GradientFlowDebugger)], labels=labels)
    layers = outputs[0]["gf"]["layers"]
    assert layers == ["backbone.layer1.conv", "backbone.layer1.bn", "backbone.layer2.conv", "backbone.layer2.bn",
                      "backbone.layer3.conv", "backbone.layer3.bn", "backbone.layer4.conv", "backbone.layer4.bn",
                      "head.fc"]
    expected = expected_norms(model, images, labels, layers)
    for i in range(5):
        out = outputs[i]["gf"]
        assert out["kind"] == "gradient_flow"
        np.testing.assert_allclose(out["grad_norms"], expected[i], rtol=1e-4, atol=1e-7)
        assert not out["missing"].any() and not out["zero"].any() and out["frozen"] == [False] * 9
        with torch.no_grad():
            loss = F.cross_entropy(model({"image": images[i:i + 1]})["logits"], labels[i:i + 1])
        assert out["loss"] == pytest.approx(float(loss), rel=1e-5)


class Branchy(nn.Module):
    """A Python branch on a tensor value: vmap cannot run it, so the debugger loops instead."""

    def __init__(self):
        super().__init__()
        self.cnn = SmallCNN(widths=(4, 4, 8, 8))

    def forward(self, inputs):
        outputs = self.cnn(inputs)
        return outputs if outputs["logits"].abs().max().item() < 1e6 else {"logits": outputs["logits"] * 0}


@pytest.mark.parametrize("vectorised", [True, False])
def test_vectorised_and_looped_paths_agree_with_autograd(vectorised):
    torch.manual_seed(0)
    model = (SmallCNN(widths=(4, 4, 8, 8)) if vectorised else Branchy()).eval()
    images, labels = torch.randn(4, 3, 16, 16), torch.tensor([5, 4, 3, 2])
    debugger = GradientFlowDebugger()
    out = debugger(make_batch(images, range(4), labels), model)
    assert debugger._vectorise is vectorised
    np.testing.assert_allclose(out["grad_norms"], expected_norms(model, images, labels, out["layers"]),
                               rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("model_class", [Flagged, FlaggedWithItem])
def test_missing_zero_and_frozen_layers_are_flagged(tmp_path, model_class):
    model = model_class().eval()
    outputs = capture_epoch(model, torch.randn(4, 3, 2, 2), tmp_path, 4, [entry("gf", GradientFlowDebugger)])
    out = outputs[1]["gf"]
    assert out["layers"] == ["used", "dead", "unused", "frozen"]
    assert out["missing"].tolist() == [False, False, True, True]
    assert out["zero"].tolist() == [False, True, False, False]
    assert out["below_rounding"].tolist() == [False, True, False, False]
    assert out["frozen"] == [False, False, False, True]
    assert out["grad_norms"][0] > 0 and (out["grad_norms"][1:] == 0).all()


class DeadBesideNaN(nn.Module):
    """``dead`` (a ReLU whose bias keeps it off) gets exactly no gradient; ``nan`` gets a NaN one (sqrt(0) at 0)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.dead, self.feat, self.nan, self.head = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 1), nn.Linear(4, 3)
        nn.init.constant_(self.dead.bias, -100.0)

    def forward(self, inputs):
        x = inputs["x"]
        return {"logits": self.head(torch.relu(self.dead(x)) + self.feat(x) + torch.sqrt(self.nan(x) * 0))}


class Vanishing(nn.Module):
    """14 sigmoid layers: the first one's gradient is 1e-11 of the head's, small but not zero."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.Sigmoid()) for _ in range(14)])
        self.head = nn.Linear(8, 3)
        for module in self.layers.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=0.3)

    def forward(self, inputs):
        return {"logits": self.head(self.layers(inputs["x"]))}


class KeyBias(nn.Module):
    """Attention whose keys get a bias of their own (``key_bias``): softmax is blind to it, so its gradient is
    zero in exact arithmetic, and rounding noise of the dtype in floating point."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.q, self.k, self.v, self.head = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 3)
        self.key_bias = nn.Linear(1, 8, bias=False)

    def forward(self, inputs):
        x = inputs["x"]
        keys = self.k(x) + self.key_bias(torch.ones(1, 1, dtype=x.dtype))
        weights = torch.softmax(self.q(x) @ keys.transpose(-1, -2), -1)
        return {"logits": self.head((weights @ self.v(x)).mean(1)).float()}


def flow(model: nn.Module, x: torch.Tensor) -> dict:
    labels = torch.arange(len(x)) % 3
    return GradientFlowDebugger()({"inputs": {"x": x}, "labels": {"class": labels},
                                   "outputs": model({"x": x})}, model)


def test_zero_is_exactly_zero_beside_nan_and_vanishing_gradients():
    """A NaN layer norm leaves a dead layer flagged; a vanishing gradient is not called zero (below_rounding
    says it is too small to tell from rounding)."""
    out = flow(DeadBesideNaN().eval(), torch.randn(2, 4))
    assert out["layers"] == ["dead", "feat", "nan", "head"] and torch.isnan(out["grad_norms"][:, 2]).all()
    assert out["zero"].tolist() == [[True, False, False, False]] * 2
    assert out["below_rounding"].tolist() == [[True, False, False, False]] * 2
    out = flow(Vanishing().eval(), torch.randn(1, 8))
    assert 0 < out["grad_norms"][0, 0] < 1e-9 * out["grad_norms"][0].max()
    assert not out["zero"][0, 0] and out["below_rounding"][0, 0]


def test_below_rounding_ignores_an_infinite_norm():
    assert below_rounding(torch.tensor([[0.0, 1.0, 1e-9, float("inf"), float("nan")]]),
                          torch.full((5,), 1e-7, dtype=torch.float64)).tolist() == [[True, False, True, False, False]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_below_rounding_scales_with_the_parameters_dtype(dtype):
    """The key bias's rounding noise is 5e-9 of the largest norm in float32, 2e-4 in bfloat16."""
    out = flow(KeyBias().to(dtype).eval(), torch.randn(2, 6, 8, dtype=dtype))
    column = out["layers"].index("key_bias")
    assert out["below_rounding"][:, column].all() and out["below_rounding"].sum() == 2
    assert (out["grad_norms"][:, column] > 0).all() and not out["zero"][:, column].any()  # rounding noise


def test_layer_types_select_layers_by_class_or_name(tmp_path):
    model = SmallCNN(widths=(4, 4, 4, 4)).eval()
    batch = make_batch(torch.randn(2, 3, 16, 16), range(2))
    by_class = GradientFlowDebugger(layer_types=[nn.Conv2d])(batch, model)
    by_name = GradientFlowDebugger(layer_types=["Linear"])(batch, model)
    assert by_class["layers"] == [f"backbone.layer{i}.conv" for i in range(1, 5)]
    assert by_name["layers"] == ["head.fc"] and by_name["grad_norms"].shape == (2, 1)


def test_leaves_grads_and_mode_alone(tmp_path):
    model = SmallCNN(widths=(4, 4, 4, 4)).train()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        GradientFlowDebugger()(make_batch(torch.randn(3, 3, 16, 16), range(3)), model)
    assert model.training and all(p.grad is None for p in model.parameters())
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert leftover_hooks(model) == 0


def test_a_criterion_works_and_a_per_element_loss_is_refused_with_advice():
    model = SmallCNN(widths=(4, 4, 4, 4)).eval()
    batch = make_batch(torch.randn(2, 3, 16, 16), range(2))
    criterion = GradientFlowDebugger(loss_fn=lambda out, labels: F.cross_entropy(out["logits"], labels["class"]))
    default = GradientFlowDebugger()
    torch.testing.assert_close(criterion(batch, model)["grad_norms"], default(batch, model)["grad_norms"])
    per_element = GradientFlowDebugger(loss_fn=lambda out, labels: F.binary_cross_entropy_with_logits(
        out["logits"], torch.zeros_like(out["logits"]), reduction="none"))
    with pytest.raises(ValueError, match=r"one loss per datapoint .* got torch.Size\(\[1, 6\]\)"):
        per_element(batch, model)
