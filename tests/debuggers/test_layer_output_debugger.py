"""LayerOutputDebugger: per-datapoint pooling against a NumPy block mean."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from debuggers.layer_output_debugger import LayerOutputDebugger
from tests.debuggers.library import capture_epoch, entry
from utils.errors import ConfigError


class Shapes(nn.Module):
    """Exposes a 4-D map (B, 2, 6, 8), a 3-D sequence (B, 2, 10) and a vector (B, 6) as layer outputs."""

    def __init__(self):
        super().__init__()
        self.map, self.seq, self.vec = nn.Identity(), nn.Identity(), nn.Identity()

    def forward(self, inputs):
        x = inputs["image"]
        self.seq(x.reshape(x.shape[0], 2, -1)[:, :, :10])
        return {"logits": self.vec(self.map(x[:, :2, :6, :8]).flatten(1)[:, :6])}


def block_mean(x, factor):
    """Mean over factor-sized blocks of the trailing dims (sizes rounded up), in NumPy."""
    spatial = x.shape[1:]
    out = np.empty((x.shape[0], *[-(-d // factor) for d in spatial]))
    for index in np.ndindex(*out.shape[1:]):
        window = tuple(slice(i * factor, min((i + 1) * factor, d)) for i, d in zip(index, spatial))
        out[(slice(None), *index)] = x[(slice(None), *window)].reshape(x.shape[0], -1).mean(1)
    return out


@pytest.fixture
def images():
    torch.manual_seed(0)
    return torch.randn(5, 3, 8, 8)


@pytest.mark.parametrize("layer, factor", [("map", 2), ("map", 4), ("seq", 3), ("map", 1)])
def test_pooled_output_matches_a_block_mean(images, tmp_path, layer, factor):
    outputs = capture_epoch(Shapes(), images, tmp_path, 2,
                            [entry("lo", LayerOutputDebugger, layer_name=layer, downsample_factor=factor)])
    raw = images[:, :2, :6, :8].numpy() if layer == "map" else images.reshape(5, 2, -1)[:, :, :10].numpy()
    for i in range(5):
        out = outputs[i]["lo"]
        assert out["kind"] == "layer_output" and out["original_shape"] == list(raw.shape[1:])
        assert out["downsample_factor"] == factor
        np.testing.assert_allclose(out["output"], block_mean(raw[i], factor), rtol=1e-5, atol=1e-6)


def test_vectors_are_kept_as_they_are(images, tmp_path):
    outputs = capture_epoch(Shapes(), images, tmp_path, 5, [entry("lo", LayerOutputDebugger, layer_name="vec")])
    np.testing.assert_allclose(outputs[3]["lo"]["output"], images[3, :2, :6, :8].flatten()[:6].numpy())


def test_downsample_factor_must_be_a_positive_int():
    with pytest.raises(ConfigError, match="downsample_factor"):
        LayerOutputDebugger("x", downsample_factor=0)
