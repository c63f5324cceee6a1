"""Batched or per datapoint (debuggers/batch_mode.py): real SequentialDebugger epochs, pages read back, each
datapoint compared with the same debugger run on that datapoint alone."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from torch import nn

from debuggers.base_debugger import BaseDebugger
from debuggers.forward_debugger import ForwardDebugger
from debuggers.wrappers.sequential_debugger import DebuggerError, SequentialDebugger
from tests.debuggers.library import entry, run_batches, run_epoch
from utils.errors import ConfigError


@pytest.fixture
def images():
    torch.manual_seed(1)
    return torch.randn(12, 3, 16, 16)


class Counting(ForwardDebugger):
    """Batch-first (a row per datapoint) and undeclared; counts its process_forward calls."""

    calls = 0

    def process_forward(self, module, input, output):
        Counting.calls += 1
        return {"energy": output.detach().pow(2).mean(dim=(1, 2, 3)), "channels": output.shape[1]}


class SeedStyle(ForwardDebugger):
    """Written for one datapoint per forward, as Pylon's examples are."""

    def process_forward(self, module, input, output):
        return {"mean": float(output.mean()), "shape": list(output.shape), "map": output.detach().cpu()}


class Similarity(ForwardDebugger):
    """A (B, B) output: each datapoint's dot product with every datapoint of its batch."""

    def process_forward(self, module, input, output):
        flat = output.detach().flatten(1)
        return {"similarity": flat @ flat.T}


class PairwiseOnly(ForwardDebugger):
    """Runs on two or more datapoints only: nothing to compare with alone."""

    def process_forward(self, module, input, output):
        if output.shape[0] < 2:
            raise ValueError("needs two datapoints")
        flat = output.detach().flatten(1)
        return {"similarity": flat @ flat.T}


class FailsOnFive(BaseDebugger):
    """Fails on the datapoint of idx 5 alone; a number for the batch otherwise."""

    def __call__(self, datapoint, model):
        if 5 in datapoint["meta_info"]["idx"].tolist() and len(datapoint["meta_info"]["idx"]) == 1:
            raise ValueError("planted failure on 5")
        return {"label_mean": float(datapoint["labels"]["class"].float().mean())}


def batch_and_singles(tokens: torch.Tensor) -> tuple[list[dict], list[dict]]:
    """``tokens`` as one batch of 4 datapoints, and as 4 batches of one."""
    batches = [{"inputs": {"tokens": tokens}, "labels": {}, "meta_info": {"idx": torch.arange(4)}}]
    singles = [{"inputs": {"tokens": tokens[i:i + 1]}, "labels": {}, "meta_info": {"idx": torch.tensor([i])}}
               for i in range(4)]
    return batches, singles

def assert_same(a, b, where=""):
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (np.ndarray, float)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=where)
    else:
        assert a == b, where


def test_a_batch_first_debugger_is_found_batched_after_one_check(model, images, tmp_path, caplog):
    Counting.calls = 0
    with caplog.at_level(logging.INFO, logger="lantern.debugger"):
        _, outputs = run_epoch(model, images, tmp_path, 4, [entry("e", Counting, layer_name="backbone.layer2")])
    assert Counting.calls == (1 + 4) + 1 + 1  # the first batch both ways, then once per batch
    found = [r.getMessage() for r in caplog.records if "runs batched" in r.getMessage()]
    assert len(found) == 1 and "debugger 'e'" in found[0] and "batch_mode = 'batched'" in found[0]
    with torch.no_grad():
        alone = model.backbone[:2](images[7:8])
    np.testing.assert_allclose(outputs[7]["e"]["energy"], float(alone.pow(2).mean()), rtol=1e-5)


def test_a_seed_style_debugger_gives_each_datapoint_what_it_gets_alone(model, images, tmp_path, caplog):
    debuggers = [entry("seed", SeedStyle, layer_name="backbone.layer3")]
    with caplog.at_level(logging.WARNING, logger="lantern.debugger"):
        _, batched = run_epoch(model, images, tmp_path / "b5", 5, debuggers)  # batches of 5, 5 and 2
    _, alone = run_epoch(model, images, tmp_path / "b1", 1, debuggers)
    for idx in range(12):
        assert_same(batched[idx]["seed"], alone[idx]["seed"], str(idx))
    assert batched[4]["seed"]["shape"] == [1, 8, 2, 2]
    with torch.no_grad():
        own = model.backbone[:3](images[4:5])
    assert batched[4]["seed"]["mean"] == pytest.approx(float(own.mean()), rel=1e-5)
    warned = [r.getMessage() for r in caplog.records if "runs per datapoint" in r.getMessage()]
    assert len(warned) == 1 and "its output is not batch-first" in warned[0] and "'mean'" in warned[0]


def test_a_b_by_b_output_is_not_split_as_rows(model, images, tmp_path):
    """Row i of a (B, B) similarity is datapoint i against the batch: each datapoint keeps what it gives alone."""
    debuggers = [entry("sim", Similarity, layer_name="backbone.layer1")]
    _, batched = run_epoch(model, images, tmp_path / "b4", 4, debuggers)
    _, alone = run_epoch(model, images, tmp_path / "b1", 1, debuggers)
    for idx in range(12):
        assert batched[idx]["sim"]["similarity"].shape == (1,)
        assert_same(batched[idx]["sim"], alone[idx]["sim"], str(idx))


def test_an_output_that_cannot_be_checked_alone_is_refused_saying_how_to_declare(model, images, tmp_path):
    _, outputs = run_epoch(model, images[:8], tmp_path, 4, [entry("pairs", PairwiseOnly, layer_name="backbone.layer1")])
    record = outputs[6]["pairs"]
    assert record["kind"] == "error" and record["message"].startswith("on datapoint 6 alone: needs two datapoints")
    assert "declare batch_mode = 'batched'" in record["message"]


def test_declared_batched_splits_by_the_contract(model, images, tmp_path):
    class Declared(PairwiseOnly):
        batch_mode = "batched"

    _, outputs = run_epoch(model, images[:8], tmp_path, 4, [entry("pairs", Declared, layer_name="backbone.layer1")])
    assert outputs[6]["pairs"]["similarity"].shape == (4,)  # row 2 of its batch of 4, as declared


def test_declared_per_datapoint_runs_alone_without_a_check(model, images, tmp_path, caplog):
    class Declared(Counting):
        batch_mode = "per_datapoint"

    Counting.calls = 0
    with caplog.at_level(logging.INFO, logger="lantern.debugger"):
        _, outputs = run_epoch(model, images, tmp_path, 4, [entry("e", Declared, layer_name="backbone.layer2")])
    assert Counting.calls == 12 + 3  # each datapoint alone, for its pages; each batch whole, what __call__ returns
    assert not [r for r in caplog.records if "runs " in r.getMessage() and "debugger 'e'" in r.getMessage()]
    assert outputs[3]["e"]["channels"] == 4


def test_a_misspelt_mode_stops_at_start_up(model):
    class Misspelt(Counting):
        batch_mode = "per-datapoint"

    with pytest.raises(ConfigError, match="batch_mode is 'per-datapoint'; declare 'batched'"):
        SequentialDebugger([entry("e", Misspelt, layer_name="backbone.layer2")], model=model)


def test_a_failure_on_one_datapoint_is_recorded_under_it_and_the_run_goes_on(model, images, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="lantern.debugger"):
        _, outputs = run_epoch(model, images, tmp_path, 4, [entry("five", FailsOnFive)])
    assert outputs[5]["five"]["kind"] == "error" and outputs[5]["five"]["type"] == "ValueError"
    assert outputs[5]["five"]["message"] == "on datapoint 5 alone: planted failure on 5"
    assert outputs[6]["five"] == {"label_mean": 0.0}  # labels are idx % 6: its own label, not the batch's mean
    assert outputs[7]["five"] == {"label_mean": 1.0}
    assert sum("debugger 'five' failed on datapoint 5" in r.getMessage() for r in caplog.records) == 1


def test_strict_stops_at_a_failure_on_one_datapoint_naming_it(model, images, tmp_path):
    with pytest.raises(DebuggerError, match="debugger 'five' failed on datapoint 5: ValueError: planted failure"):
        run_epoch(model, images, tmp_path, 4, [entry("five", FailsOnFive)], strict=True)


class SequenceFirst(nn.Module):
    """An nn.MultiheadAttention over (L, B, E) tokens, batch_first=False, as older code writes it."""

    def __init__(self):
        super().__init__()
        self.attention = nn.MultiheadAttention(8, 2)

    def forward(self, inputs):
        tokens = inputs["tokens"].transpose(0, 1)  # (L, B, E)
        return {"logits": self.attention(tokens, tokens, tokens)[0].mean(0)}


class MeanOfOutput(ForwardDebugger):
    def process_forward(self, module, input, output):
        return {"mean": float(output[0].mean()), "weights": output[1].detach()}


def test_a_sequence_first_layer_is_cut_along_its_batch_dimension(tmp_path):
    """(L, B, E) with L == B: the batch is dimension 1 by the module's type, never guessed from sizes."""
    torch.manual_seed(0)
    model = SequenceFirst().eval()
    tokens = torch.randn(4, 4, 8)  # L == B == 4
    batches, singles = batch_and_singles(tokens)
    debuggers = [entry("m", MeanOfOutput, layer_name="attention")]
    _, batched = run_batches(model, batches, tmp_path / "b4", debuggers)
    _, alone = run_batches(model, singles, tmp_path / "b1", debuggers)
    for i in range(4):
        assert_same(batched[i]["m"], alone[i]["m"], str(i))
        with torch.no_grad():
            own = model.attention(*[tokens[i:i + 1].transpose(0, 1)] * 3)[0]
        assert batched[i]["m"]["mean"] == pytest.approx(float(own.mean()), rel=1e-5)


class Windowed(nn.Module):
    """A layer whose output has windows x B rows, as Swin's attention does."""

    def forward(self, x):
        return x.repeat(3, 1, 1, 1)


class WindowNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.windows = Windowed()

    def forward(self, inputs):
        return {"logits": self.windows(inputs["image"]).mean(dim=(1, 2, 3))}


def test_a_layer_whose_batch_dimension_is_not_the_batch_is_refused_saying_what_to_declare(images, tmp_path):
    batches = [{"inputs": {"image": images[:4]}, "labels": {}, "meta_info": {"idx": torch.arange(4)}}]
    _, outputs = run_batches(WindowNet().eval(), batches, tmp_path, [entry("w", SeedStyle, layer_name="windows")])
    record = outputs[2]["w"]
    assert record["kind"] == "error" and "layer 'windows' output tensor 0 is Tensor(12, 3, 16, 16)" in record["message"]
    assert "declare batch_mode = 'batched'" in record["message"]


class Precision(BaseDebugger):
    """Batch-first, runs the model; records the float32 precision torch lets convolutions and matmuls take."""

    runs_model = True
    seen: list = []

    def __call__(self, datapoint, model):
        Precision.seen.append((torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision()))
        with torch.enable_grad():
            image = datapoint["inputs"]["image"].clone().requires_grad_(True)
            model({"image": image})["logits"].max(dim=1).values.sum().backward()
        return image.grad.abs().amax(dim=1)


def float32_settings():
    backends = torch.backends
    return (backends.cudnn.allow_tf32, torch.get_float32_matmul_precision(), backends.cuda.matmul.fp32_precision,
            backends.cudnn.conv.fp32_precision, backends.cudnn.rnn.fp32_precision)


def test_the_two_ways_are_compared_in_full_float32_and_the_settings_come_back(model, images, tmp_path):
    """A GPU's TF32 convolutions (on by default) round differently at batch 8 than at batch 1: an input gradient
    differs by 3-8% of its maximum on an H200, which sent this batch-first debugger to per datapoint. The comparison
    runs with TF32 off; the batches after it, and the run after it, keep the user's settings."""
    torch.set_float32_matmul_precision("high")  # TF32 for matmuls too, as many training scripts ask
    before = float32_settings()
    Precision.seen = []
    try:
        _, outputs = run_epoch(model, images, tmp_path, 4, [entry("grad", Precision)])
        after = float32_settings()
    finally:
        torch.set_float32_matmul_precision("highest")
    assert Precision.seen[:5] == [(False, "highest")] * 5  # the first batch, both ways
    assert Precision.seen[5:] == [(True, "high")] * 2  # the user's settings for the rest
    assert after == before
    assert outputs[6]["grad"].shape == (16, 16)


class AddTable(nn.Module):
    """``x + table``: the table (a rotary or position table, (L, D)) is an input with no batch dimension, passed
    positionally as reference transformer code does (``layer(x, freqs_cis, mask)``)."""

    def forward(self, x, table):
        return x + table


class TableNet(nn.Module):
    def __init__(self, length):
        super().__init__()
        self.add = AddTable()
        self.table = nn.Parameter(torch.randn(length, 4))

    def forward(self, inputs):
        return {"logits": self.add(inputs["tokens"], self.table).mean(dim=(1, 2))}


class TableAware(ForwardDebugger):
    """Written for one datapoint per forward; reads the layer's inputs too."""

    def process_forward(self, module, input, output):
        return {"mean": float(output.mean()), "table_rows": int(input[1].shape[0]), "map": output.detach()}


@pytest.mark.parametrize("length", [16, 3])
def test_an_input_without_a_batch_dimension_is_given_whole_as_at_batch_1(tmp_path, length):
    """The batch is the model's (4), not the size of the largest tensor the layer takes (the table's 16 rows);
    a table of 3 rows is no batch either."""
    torch.manual_seed(0)
    model = TableNet(length).eval()
    tokens = torch.randn(4, length, 4)
    batches, singles = batch_and_singles(tokens)
    debuggers = [entry("t", TableAware, layer_name="add")]
    _, batched = run_batches(model, batches, tmp_path / "b4", debuggers)
    _, alone = run_batches(model, singles, tmp_path / "b1", debuggers)
    for i in range(4):
        assert "kind" not in batched[i]["t"], batched[i]["t"]
        assert_same(batched[i]["t"], alone[i]["t"], str(i))
        assert batched[i]["t"]["table_rows"] == length
        assert batched[i]["t"]["mean"] == pytest.approx(float((tokens[i] + model.table).mean()), rel=1e-5)
