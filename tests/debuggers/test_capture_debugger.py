"""CaptureDebugger with the demo model's capture points and hand-made ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from debuggers.capture import capture_debug_state
from debuggers.capture_debugger import CaptureDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from models import AttentionClassifier
from tests.debuggers.library import capture_epoch, entry, leftover_hooks, make_batch
from utils.errors import ConfigError


@pytest.fixture
def model():
    torch.manual_seed(0)
    return AttentionClassifier(patch_size=4, dim=32, depth=2, num_heads=2).eval()


@pytest.fixture
def images():
    torch.manual_seed(1)
    return torch.randn(3, 3, 16, 16)


def test_states_match_an_independent_computation(model, images, tmp_path):
    outputs = capture_epoch(model, images, tmp_path, 2, [entry("cap", CaptureDebugger)])
    with torch.no_grad():
        embeddings = model.patch_embed(images)
        encoding = model.pos_embed.encoding((4, 4), images.device, images.dtype)[0]
    for i in range(3):
        states = outputs[i]["cap"]["states"]
        assert outputs[i]["cap"]["kind"] == "captured_states"
        assert set(states) == {"patch_embed", "pos_embed", "blocks.0.attn", "blocks.1.attn"}
        emb = states["patch_embed"]["embeddings"]
        assert emb["kind"] == "embedding" and emb["metadata"] == {"grid": [4, 4]}
        np.testing.assert_allclose(emb["data"], embeddings[i].numpy(), rtol=1e-5, atol=1e-6)
        pos = states["pos_embed"]["position_encoding"]
        assert pos["kind"] == "position_encoding"
        np.testing.assert_allclose(pos["data"], encoding.numpy(), rtol=1e-6)
        assert pos["shared"] and not emb["shared"]  # declared without a batch: the same for every datapoint
        weights = states["blocks.1.attn"]["attention_weights"]
        assert weights["kind"] == "attention" and weights["data"].shape == (2, 16, 16)
        np.testing.assert_allclose(weights["data"].sum(-1), 1.0, rtol=1e-5)
        assert set(states["blocks.0.attn"]) == {"attention_scores", "attention_weights"}


@pytest.mark.parametrize("args, expected", [
    ({"components": ["blocks.*.attn"], "states": "attention_weights"},
     {"blocks.0.attn": {"attention_weights"}, "blocks.1.attn": {"attention_weights"}}),
    ({"capture_attention": False}, {"patch_embed": {"embeddings"}, "pos_embed": {"position_encoding"}}),
    ({"capture_embeddings": False, "capture_position_encoding": False, "components": "blocks.1.*"},
     {"blocks.1.attn": {"attention_scores", "attention_weights"}}),
])
def test_filters(model, images, tmp_path, args, expected):
    outputs = capture_epoch(model, images, tmp_path, 3, [entry("cap", CaptureDebugger, **args)])
    assert {c: set(s) for c, s in outputs[0]["cap"]["states"].items()} == expected


def test_nothing_matched_is_a_not_run_record(model, images, tmp_path):
    outputs = capture_epoch(model, images, tmp_path, 3, [entry("cap", CaptureDebugger, components=["decoder*"])])
    assert outputs[0]["cap"]["kind"] == "not_run" and "decoder*" in outputs[0]["cap"]["message"]


class Offers(nn.Module):
    """Offers a shared (1, N, D) table, a non-batch matrix, a number, values later changed in place (bare and
    in a dict that also holds a shared table), a sequence-first (L, B, 1) state, and a state on every other
    call only."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, inputs):
        x = inputs["image"].flatten(1)[:, :6]
        self.calls += 1
        capture_debug_state("enc", "position_table", torch.arange(12.0).reshape(1, 4, 3), {"device": x.device})
        capture_debug_state("enc", "mixing", torch.eye(5))
        capture_debug_state("enc", "temperature", 0.5)
        y = x * 1.0
        capture_debug_state("enc", "before_inplace", y)
        capture_debug_state("enc", "layer", {"pos": torch.arange(12.0).reshape(1, 4, 3), "x": [y]})
        capture_debug_state("enc", "seq_first", x[:, :4].t()[..., None], {"batch_dim": 1})
        y.mul_(0)
        if self.calls % 2 == 1:
            capture_debug_state("enc", "odd_calls_only", x)
        return {"logits": x + y}


@pytest.mark.parametrize("batch_size", [1, 4])
def test_data_without_the_batch_first_is_given_to_every_datapoint(tmp_path, batch_size):
    images = torch.randn(4, 3, 2, 2)
    outputs = capture_epoch(Offers(), images, tmp_path, batch_size, [entry("cap", CaptureDebugger)])
    for i in range(4):
        states = outputs[i]["cap"]["states"]["enc"]
        np.testing.assert_array_equal(states["position_table"]["data"], np.arange(12.0).reshape(4, 3))
        assert states["position_table"]["kind"] == "position_encoding"
        assert states["position_table"]["metadata"] == {"device": "cpu"}
        np.testing.assert_array_equal(states["mixing"]["data"], np.eye(5))
        assert states["mixing"]["unsplit"] == ["."]  # (5, 5): no batch dimension, said so
        assert states["temperature"] == {"kind": "tensor", "data": 0.5, "metadata": {}, "unsplit": [], "shared": False}
        row = images[i].flatten()[:6].numpy()
        np.testing.assert_allclose(states["before_inplace"]["data"], row)
        np.testing.assert_array_equal(states["layer"]["data"]["pos"], np.arange(12.0).reshape(4, 3))
        np.testing.assert_allclose(states["layer"]["data"]["x"][0], row)  # copied: the later mul_ did not leak
        assert states["layer"]["unsplit"] == [] and states["position_table"]["unsplit"] == []
        np.testing.assert_allclose(states["seq_first"]["data"], row[:4, None])


def test_states_are_cleared_between_batches(tmp_path):
    images = torch.randn(4, 3, 2, 2)
    outputs = capture_epoch(Offers(), images, tmp_path, 2, [entry("cap", CaptureDebugger)])
    assert "odd_calls_only" in outputs[0]["cap"]["states"]["enc"]  # first batch: offered
    assert "odd_calls_only" not in outputs[2]["cap"]["states"]["enc"]  # second batch: not offered


def test_listener_exists_only_while_enabled(model, images):
    debugger = SequentialDebugger([entry("cap", CaptureDebugger)], model=model)
    assert leftover_hooks(model) == 0
    debugger.reset_buffer()
    debugger.enabled = True
    assert leftover_hooks(model) == 1
    with torch.no_grad():
        batch = make_batch(images, range(3))
        batch["outputs"] = model(batch["inputs"])
        assert debugger(batch, model)["cap"]["kind"] == "captured_states"
    debugger.close()
    assert leftover_hooks(model) == 0


def test_patterns_must_be_strings():
    with pytest.raises(ConfigError, match="components must be fnmatch patterns"):
        CaptureDebugger(components=[3])
