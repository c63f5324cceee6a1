"""NaNInfDebugger on a model with a planted NaN/Inf for some datapoints only."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from debuggers.nan_inf_debugger import NaNInfDebugger
from debuggers.outputs import ROOT_MODULE_NAME
from models import SmallCNN
from tests.compat.architectures import SeqFirstClassifier
from tests.debuggers.library import capture_epoch, entry, leftover_hooks, run_batches
from utils.errors import ConfigError


class Log(nn.Module):
    def forward(self, x):
        return torch.log(x)


class Pair(nn.Module):
    def forward(self, x):
        return x * 2, None


class Named(nn.Module):
    def forward(self, x):
        return {"y": x + 1, "note": "text"}


class Silent(nn.Module):
    def forward(self, x):
        return None


class Planted(nn.Module):
    """image -> first (finite) -> log (NaN for negative inputs, -Inf for zeros) -> tuple -> dict -> head."""

    def __init__(self):
        super().__init__()
        self.first = nn.Identity()
        self.log = Log()
        self.pair = Pair()
        self.named = Named()
        self.silent = Silent()
        self.head = nn.Linear(4, 6)

    def forward(self, inputs):
        x = self.first(inputs["image"].flatten(1)[:, :4])
        y = self.named(self.pair(self.log(x))[0])["y"]
        self.silent(y)
        return {"logits": self.head(y)}


@pytest.fixture
def images():
    torch.manual_seed(0)
    images = torch.rand(8, 3, 2, 2) + 0.5  # all positive: log is finite
    images[2, 0, 0, 1] = -3.0  # NaN in log for datapoint 2
    images[5, 0, 0, 0] = 0.0  # -Inf in log for datapoint 5
    return images


def test_first_bad_module_per_datapoint(images, tmp_path):
    outputs = capture_epoch(Planted(), images, tmp_path, 3, [entry("nan", NaNInfDebugger)])
    chain = ["log", "pair", "named", "head", ROOT_MODULE_NAME]
    for i in range(8):
        out = outputs[i]["nan"]
        assert out["kind"] == "nan_origin" and out["modules_checked"] > 0
        if i in (2, 5):
            row = images[i].flatten()[:4].numpy()
            assert out["first_module"] == "log" and out["module_type"] == "Log"
            assert out["bad_modules"] == chain
            assert out["input_min"] == pytest.approx(float(row.min()))
            assert out["input_max"] == pytest.approx(float(row.max()))
        else:
            assert out["first_module"] is None and out["module_type"] is None and out["bad_modules"] == []
            assert math.isnan(out["input_min"]) and math.isnan(out["input_max"])


def test_batch_1_and_8_agree(images, tmp_path):
    one = capture_epoch(Planted(), images, tmp_path / "one", 1, [entry("nan", NaNInfDebugger)])
    eight = capture_epoch(Planted(), images, tmp_path / "eight", 8, [entry("nan", NaNInfDebugger)])
    for i in range(8):
        a, b = one[i]["nan"], eight[i]["nan"]
        assert (a["first_module"], a["bad_modules"]) == (b["first_module"], b["bad_modules"])
        np.testing.assert_equal([a["input_min"], a["input_max"]], [b["input_min"], b["input_max"]])


@pytest.mark.parametrize("declared", [False, True])
def test_output_without_the_batch_first_blames_no_datapoint_unless_declared(tmp_path, declared):
    class Transposed(nn.Module):
        def __init__(self):
            super().__init__()
            self.swap = nn.Identity()

        def forward(self, inputs):
            x = inputs["image"].flatten(1)[:, :6]
            x = self.swap(torch.log(x).t())  # (6, B): rows are features, not datapoints
            return {"logits": x.t()}

    images = torch.ones(3, 3, 2, 2)
    images[1, 0, 0, 0] = -1.0
    args = {"batch_dims": {"swap": 1}} if declared else {}
    outputs = capture_epoch(Transposed(), images, tmp_path, 3, [entry("nan", NaNInfDebugger, **args)])
    # the NaN comes from functional code in the model's forward: 'swap' is the first module to show it
    first = "swap" if declared else ROOT_MODULE_NAME
    assert [outputs[i]["nan"]["first_module"] for i in range(3)] == [None, first, None]
    unknown = outputs[0]["nan"]["batch_dim_unknown"]
    assert unknown == [] if declared else ("module 'swap'" in unknown[0] and "shape (6, 3)" in unknown[0])


def test_hooks_on_every_module_are_removed_after_the_epoch(tmp_path):
    model = SmallCNN(widths=(4, 4, 4, 4)).eval()
    outputs = capture_epoch(model, torch.randn(2, 3, 16, 16), tmp_path, 2, [entry("nan", NaNInfDebugger)])
    assert outputs[0]["nan"]["modules_checked"] == len(list(model.modules()))
    assert outputs[0]["nan"]["first_module"] is None
    assert leftover_hooks(model) == 0


def token_batches(tokens, batch_size):
    return [{"inputs": {"tokens": tokens[s:s + batch_size]}, "meta_info": {"idx": torch.arange(s, s + batch_size)}}
            for s in range(0, len(tokens), batch_size)]


@pytest.fixture
def padded_tokens():
    """4 sequences of length 4 (L == B): datapoint 1 is all padding, so the attention makes NaN for it alone."""
    torch.manual_seed(0)
    tokens = torch.randint(1, 20, (4, 4))
    tokens[1] = 0
    return tokens


@pytest.mark.parametrize("batch_size", [4, 1])
def test_sequence_first_outputs_blame_the_poisoned_datapoint_only(padded_tokens, tmp_path, batch_size):
    torch.manual_seed(0)
    model = SeqFirstClassifier().eval()
    outputs = run_batches(model, token_batches(padded_tokens, batch_size), tmp_path,
                          [entry("nan", NaNInfDebugger, batch_dims={"norm": 1})])[1]
    assert outputs[1]["nan"]["first_module"] == "attn" and outputs[1]["nan"]["module_type"] == "MultiheadAttention"
    assert outputs[1]["nan"]["bad_modules"] == ["attn", "norm", "head", ROOT_MODULE_NAME]
    for i in (0, 2, 3):
        assert outputs[i]["nan"]["first_module"] is None and outputs[i]["nan"]["bad_modules"] == []
        assert outputs[i]["nan"]["batch_dim_unknown"] == []


def test_an_undeclared_sequence_first_module_is_said_to_be_unknown(tmp_path):
    torch.manual_seed(0)
    model = SeqFirstClassifier().eval()
    tokens = torch.randint(1, 20, (3, 5))  # L = 5 != B = 3: 'norm' (L, B, E) cannot be split by the contract
    tokens[2] = 0
    outputs = run_batches(model, token_batches(tokens, 3), tmp_path, [entry("nan", NaNInfDebugger)])[1]
    assert outputs[0]["nan"]["first_module"] is None  # the origin is still per datapoint: 'attn' is known
    assert outputs[2]["nan"]["first_module"] == "attn"
    message = outputs[0]["nan"]["batch_dim_unknown"]
    assert len(message) == 1 and "module 'norm'" in message[0] and "shape (5, 3, 16)" in message[0]
    assert "batch_dims" in message[0]
    assert all("norm" not in outputs[i]["nan"]["bad_modules"] for i in range(3))  # no guess: said plainly


def test_batch_dims_must_map_patterns_to_dimensions():
    with pytest.raises(ConfigError, match="batch_dims must map module-name patterns"):
        NaNInfDebugger(batch_dims={"norm": "1"})
