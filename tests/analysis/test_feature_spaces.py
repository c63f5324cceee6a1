"""Feature spaces of any shape, captured by ``LayerOutputDebugger`` into real pages and read back by the analysis
(``analysis/internals.py``), against a hand-written pooling of each layer's output: units kept, positions averaged,
padding left out."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from analysis.internals import pooled_layer_output, read_internals
from debuggers.feature_layout import CHANNELS_FIRST, TOKENS, module_layout, output_layout
from debuggers.layer_output_debugger import LayerOutputDebugger
from models.attention_classifier import TransformerBlock
from models.signal_cnn import SignalCNN
from tests.debuggers.library import entry, run_batches

BATCH, LENGTH, DIM = 6, 10, 8


class EveryShape(nn.Module):
    """A Linear (B, C), a Conv1d (B, C, T), a Conv2d (B, C, H, W), a Conv3d (B, C, D, H, W) and a transformer block
    over padded tokens (B, T, D), each reading its own input."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(12, 5)
        self.conv1d = nn.Conv1d(3, 7, 3, padding=1)
        self.conv2d = nn.Conv2d(3, 6, 3, padding=1)
        self.conv3d = nn.Conv3d(2, 4, 3, padding=1)
        self.block = TransformerBlock(DIM, 2, 2, "block")

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        padding = inputs["attention_mask"] == 0
        outputs = [self.linear(inputs["vector"]), self.conv1d(inputs["signal"]), self.conv2d(inputs["image"]),
                   self.conv3d(inputs["volume"]), self.block(inputs["tokens"], (1, LENGTH), padding)]
        return {"logits": torch.stack([o.flatten(1).mean(1) for o in outputs], dim=1)}


def batches() -> list[dict]:
    torch.manual_seed(0)
    lengths = torch.tensor([10, 3, 7, 1, 10, 5])
    inputs = {"vector": torch.randn(BATCH, 12), "signal": torch.randn(BATCH, 3, 16),
              "image": torch.randn(BATCH, 3, 8, 8), "volume": torch.randn(BATCH, 2, 4, 8, 8),
              "tokens": torch.randn(BATCH, LENGTH, DIM),
              "attention_mask": (torch.arange(LENGTH)[None] < lengths[:, None]).long()}
    return [{"inputs": {key: value[rows] for key, value in inputs.items()},
             "labels": {"class": torch.zeros(len(rows), dtype=torch.long)}, "meta_info": {"idx": torch.tensor(rows)}}
            for rows in ([0, 1, 2, 3], [4, 5])]


def by_hand(model: EveryShape, batch: dict, layer: str) -> np.ndarray:
    """Each datapoint's units, averaged over its positions (its real tokens) by hand."""
    inputs = batch["inputs"]
    with torch.no_grad():
        if layer == "block":
            padding = inputs["attention_mask"] == 0
            tokens = model.block(inputs["tokens"], (1, LENGTH), padding).numpy()
            real = inputs["attention_mask"].numpy().astype(bool)
            return np.stack([tokens[i][real[i]].mean(axis=0) for i in range(len(tokens))])
        source = {"linear": "vector", "conv1d": "signal", "conv2d": "image", "conv3d": "volume"}[layer]
        output = getattr(model, layer)(inputs[source]).numpy()
    return output.reshape(len(output), output.shape[1], -1).mean(axis=2)


@pytest.mark.parametrize("layer, units", [("linear", 5), ("conv1d", 7), ("conv2d", 6), ("conv3d", 4),
                                          ("block", DIM)])
def test_each_shape_is_pooled_over_its_positions_with_its_units_kept(tmp_path, layer, units):
    model = EveryShape().eval()
    run_batches(model, batches(), tmp_path, [entry("space", LayerOutputDebugger, layer_name=layer)])
    internals = read_internals(str(tmp_path))
    idx, vectors = internals.vectors["space"]
    expected = np.concatenate([by_hand(model, batch, layer) for batch in batches()])
    assert idx.tolist() == list(range(BATCH)) and vectors.shape == (BATCH, units)
    np.testing.assert_allclose(vectors, expected, rtol=1e-5, atol=1e-6)


def test_the_layout_comes_from_the_layer_type_or_the_attention_mask():
    model = EveryShape()
    assert [module_layout(getattr(model, name)) for name in ("conv1d", "conv2d", "conv3d", "linear", "block")] == \
        [CHANNELS_FIRST] * 3 + [TOKENS] * 2
    signal = SignalCNN()
    assert module_layout(signal.backbone.stage3) == CHANNELS_FIRST  # conv, bn, relu: its last typed module
    assert module_layout(signal.head) == TOKENS  # pool, flatten, fc
    plain = nn.Identity()  # tensor code with no typed module: the attention mask tells
    output = torch.zeros(2, 5, 3)
    assert output_layout(plain, output) == CHANNELS_FIRST
    assert output_layout(plain, output, {"attention_mask": torch.ones(2, 5)}) == TOKENS
    assert output_layout(plain, output, {"attention_mask": torch.ones(2, 4)}) == CHANNELS_FIRST


def test_a_capture_from_before_layouts_reads_as_channels_first():
    legacy = {"kind": "layer_output", "output": np.arange(32 * 8, dtype=np.float64).reshape(32, 8)}
    np.testing.assert_allclose(pooled_layer_output(legacy), legacy["output"].mean(axis=1))
    assert pooled_layer_output(legacy).shape == (32,)  # a 32-channel Conv1d keeps its 32 channels
