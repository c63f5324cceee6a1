"""The model report: parameter counts, FLOPs by hand formulas, and the runner writing it once."""

from __future__ import annotations

import json
import os

import pytest
import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from debuggers.model_report import build_model_report, write_model_report
from debuggers.outputs import ROOT_MODULE_NAME
from models import SmallCNN
from run_dir.names import MODEL_REPORT_FILE
from runners.config_file import load_config
from runners.trainers import BaseTrainer

DEBUGGER = """
from debuggers.feature_map_debugger import FeatureMapDebugger
config["debugger"] = {"class": SequentialDebugger, "args": {"debuggers_config": [
    {"name": "fm", "debugger_config": {"class": FeatureMapDebugger, "args": {"layer_name": "backbone.layer4"}}}]}}
"""


def test_parameters_and_flops_match_hand_counts():
    model = SmallCNN(widths=(4, 8, 8, 16))
    model.head.requires_grad_(False)
    report = build_model_report(model, {"image": torch.randn(1, 3, 16, 16)})
    layers = {layer["name"]: layer for layer in report["layers"]}
    assert layers["backbone.layer1.conv"] == {"name": "backbone.layer1.conv", "type": "Conv2d", "parameters": 3 * 4 * 9,
                                              "trainable": 3 * 4 * 9, "frozen": 0, "flops": 2 * 4 * 3 * 9 * 16 * 16,
                                              "output_shape": [1, 4, 16, 16], "output_dtype": "float32"}
    assert layers["backbone.layer2.conv"]["flops"] == 2 * 8 * 4 * 9 * 8 * 8  # after one 2x2 pool
    assert layers["backbone.layer1.bn"]["parameters"] == 8 and layers["backbone.layer1.bn"]["flops"] == 0
    assert layers["head.fc"] == {"name": "head.fc", "type": "Linear", "parameters": 16 * 6 + 6, "trainable": 0,
                                 "frozen": 16 * 6 + 6, "flops": 2 * 16 * 6, "output_shape": [1, 6],
                                 "output_dtype": "float32"}
    total = sum(p.numel() for p in model.parameters())
    assert report["parameters"] == {"total": total, "trainable": total - 102, "frozen": 102}
    assert report["total_flops"] == report["module_flops"][ROOT_MODULE_NAME] == sum(
        layer["flops"] for layer in report["layers"])
    assert report["batch_size"] == 1 and report["input_shapes"] == [[1, 3, 16, 16]]
    assert model.head.fc.weight.grad is None and model.training


def test_a_model_the_counter_cannot_run_still_gets_its_parameters():
    class Picky(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, inputs):
            raise ValueError("needs a 'tokens' input")

    report = build_model_report(Picky(), {"image": torch.zeros(1, 2)})
    assert report["total_flops"] is None and "needs a 'tokens' input" in report["flops_error"]
    assert report["parameters"]["total"] == 6 and report["layers"][0]["flops"] is None


def test_report_round_trips_through_json(tmp_path):
    report = build_model_report(SmallCNN(widths=(4, 4, 4, 4)), {"image": torch.randn(1, 3, 16, 16)})
    write_model_report(str(tmp_path / MODEL_REPORT_FILE), report)
    assert json.loads((tmp_path / MODEL_REPORT_FILE).read_text()) == report
    assert os.listdir(tmp_path) == [MODEL_REPORT_FILE]


@pytest.mark.parametrize("with_debugger", [True, False])
def test_runner_writes_the_report_only_with_a_debugger(tiny_config, with_debugger):
    config = load_config(tiny_config(epochs=1, train_size=16, val_size=4, extra=DEBUGGER if with_debugger else ""))
    BaseTrainer(config).run()
    path = os.path.join(config["work_dir"], MODEL_REPORT_FILE)
    assert os.path.exists(path) == with_debugger
    if with_debugger:
        report = json.loads(open(path).read())
        assert report["model"] == "SmallCNN" and report["batch_size"] == 1 and report["total_flops"] > 0


@pytest.mark.parametrize("model", [
    nn.MultiheadAttention(16, 2, batch_first=True),
    nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), 2,
                          enable_nested_tensor=False),
], ids=["MultiheadAttention", "TransformerEncoder"])
def test_attention_flops_are_counted_like_the_explicit_path(model):
    """Eval + no_grad takes PyTorch's fused attention fast path, and scaled_dot_product_attention a fused CPU
    kernel, which the counter has no formula for: both counted as the matmuls they fuse."""
    class Wrapper(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, inputs):
            x = inputs["x"]
            out = self.inner(x, x, x) if isinstance(self.inner, nn.MultiheadAttention) else self.inner(x)
            return {"logits": out[0] if isinstance(out, tuple) else out}

    wrapper = Wrapper()
    x = torch.randn(3, 5, 16)
    report = build_model_report(wrapper, {"x": x})
    reference = torch.utils.flop_counter.FlopCounterMode(display=False)
    with reference, sdpa_kernel(SDPBackend.MATH):  # training mode, unfused attention: matmuls the counter sees
        wrapper({"x": x})
    assert report["total_flops"] == reference.get_total_flops() > 0
    assert report["module_flops"]["inner"] == reference.get_total_flops()
    assert torch.backends.mha.get_fastpath_enabled()  # switched back on


class Mixed(nn.Module):
    """A conv, a cast to float64 and an argmax: outputs of three dtypes, and a module called twice."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.act = nn.ReLU()
        self.fc = nn.Linear(4, 5).double()

    def forward(self, inputs):
        x = self.act(self.act(self.conv(inputs["image"])))
        logits = self.fc(x.mean(dim=(2, 3)).double())
        return {"logits": logits, "predicted": logits.argmax(1)}


def test_every_module_s_shapes_and_dtypes_are_what_torch_reports():
    model = Mixed()
    inputs = {"image": torch.randn(2, 3, 8, 8)}
    seen = {}

    def keep(name):
        def hook(module, args, out):
            seen.setdefault(name, (args, out))
        return hook

    handles = [module.register_forward_hook(keep(name)) for name, module in model.named_modules()]
    with torch.no_grad():
        model(inputs)
    for handle in handles:
        handle.remove()
    report = build_model_report(model, inputs)
    shapes = {entry["name"]: entry for entry in report["module_shapes"]}
    assert list(shapes) == ["conv", "act", "fc", ROOT_MODULE_NAME]  # the order they finished
    for name, (args, out) in seen.items():
        entry = shapes[name or ROOT_MODULE_NAME]
        outs = list(out.values()) if isinstance(out, dict) else [out]
        assert entry["output_shapes"] == [list(t.shape) for t in outs]
        assert entry["output_dtypes"] == [str(t.dtype).removeprefix("torch.") for t in outs]
        assert entry["input_shapes"] == ([[2, 3, 8, 8]] if not name else [list(a.shape) for a in args])
    assert shapes["act"]["calls"] == 2 and shapes[ROOT_MODULE_NAME]["output_dtypes"] == ["float64", "int64"]
    layers = {layer["name"]: layer for layer in report["layers"]}
    assert layers["fc"]["output_shape"] == [2, 5] and layers["fc"]["output_dtype"] == "float64"
    assert "failed_module" not in report


def test_a_shape_mismatch_names_the_module_its_expectation_and_its_input():
    """The PyTorch chapter's first error: 784 features into nn.Linear(512, 10)."""
    class Mismatch(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(512, 10)  # Expects 512 features!

        def forward(self, inputs):
            return {"logits": self.linear(inputs["x"])}

    report = build_model_report(Mismatch(), {"x": torch.randn(32, 784)})
    assert report["failed_module"] == {"name": "linear", "type": "Linear", "input_shapes": [[32, 784]],
                                       "module": "in_features=512, out_features=10, bias=True"}
    assert "32x784 and 512x10" in report["flops_error"]


def test_conv_filters_are_the_first_conv_layers_weights():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), *[nn.Conv2d(4, 4, 3) for _ in range(4)])
    model.forward = lambda inputs: {"logits": nn.Sequential.forward(model, inputs["image"]).mean(dim=(2, 3))}
    report = build_model_report(model, {"image": torch.randn(1, 3, 16, 16)})
    convs = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Conv2d)]
    assert [entry["layer"] for entry in report["conv_filters"]] == [name for name, _ in convs[:4]]
    first, second = report["conv_filters"][:2]
    assert first["rgb"] and first["weight_shape"] == [4, 3, 3, 3]
    torch.testing.assert_close(torch.tensor(first["filters"]), convs[0][1].weight.detach())
    assert not second["rgb"]
    torch.testing.assert_close(torch.tensor(second["filters"]), convs[1][1].weight.detach()[:, 0])
    assert report["conv_filters_at"] == "start-up"


def test_the_runner_refreshes_the_filters_with_each_epoch_s_weights(tiny_config):
    config = load_config(tiny_config(epochs=2, train_size=16, val_size=4, extra=DEBUGGER))
    BaseTrainer(config).run()
    report = json.loads(open(os.path.join(config["work_dir"], MODEL_REPORT_FILE)).read())
    trained = torch.load(os.path.join(config["work_dir"], "epoch_1", "checkpoint.pt"), weights_only=True)
    assert report["conv_filters_at"] == "epoch 1"
    torch.testing.assert_close(torch.tensor(report["conv_filters"][0]["filters"]),
                               trained["model_state_dict"]["backbone.layer1.conv.weight"])
