"""ActivationStatsDebugger against NumPy, per datapoint."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from debuggers.activation_stats_debugger import ActivationStatsDebugger, batch_histogram
from tests.debuggers.library import capture_epoch, entry


@pytest.fixture
def images():
    torch.manual_seed(1)
    return torch.randn(5, 3, 16, 16)


def numpy_stats(x):
    flat = x.reshape(-1).astype(np.float64)
    return {"mean": flat.mean(), "std": flat.std(), "min": flat.min(), "max": flat.max(),
            "l1_norm": np.abs(flat).mean(), "l2_norm": np.sqrt((flat ** 2).sum()),
            "sparsity": (flat == 0).mean(), "positive_ratio": (flat > 0).mean(),
            "saturation_low": (flat <= -1).mean(), "saturation_high": (flat >= 1).mean(), "nonfinite_ratio": 0.0}


@pytest.mark.parametrize("layer", ["backbone.layer1.bn", "head.fc"])
def test_statistics_match_numpy(model, images, tmp_path, layer):
    outputs = capture_epoch(model, images, tmp_path, 2,
                            [entry("st", ActivationStatsDebugger, layer_name=layer, histogram_bins=10)])
    captured = []
    handle = dict(model.named_modules())[layer].register_forward_hook(
        lambda m, i, o: captured.append(o.detach().clone()))  # returns None: the output is not replaced
    with torch.no_grad():
        model({"image": images})
    handle.remove()
    expected_all = captured[0].numpy()
    for i in range(len(images)):
        out, x = outputs[i]["st"], expected_all[i]
        assert out["kind"] == "statistics" and out["shape"] == list(x.shape)
        for name, value in numpy_stats(x).items():
            assert out[name] == pytest.approx(value, rel=1e-4, abs=1e-6), name
        counts, edges = np.histogram(x, bins=10, range=(x.min(), x.max()))
        np.testing.assert_allclose(out["histogram_edges"], edges, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(out["histogram"], counts)
        np.testing.assert_allclose(out["sample_values"], x.reshape(-1)[:100], rtol=1e-5, atol=1e-6)
        if x.ndim >= 2:
            channels = x.reshape(x.shape[0], -1)
            np.testing.assert_allclose(out["channel_means"], channels.mean(1), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(out["channel_stds"], channels.std(1), rtol=1e-4, atol=1e-6)
        else:
            assert "channel_means" not in out


def test_bn_output_is_seen_before_the_in_place_relu(model, images, tmp_path):
    outputs = capture_epoch(model, images[:2], tmp_path, 2,
                            [entry("st", ActivationStatsDebugger, layer_name="backbone.layer1.bn")])
    assert outputs[0]["st"]["min"] < 0 and outputs[0]["st"]["positive_ratio"] < 1


def test_histogram_of_constant_and_non_finite_rows():
    rows = torch.tensor([[2.0, 2.0, 2.0, 2.0], [0.0, float("nan"), float("inf"), 1.0]])
    counts, edges = batch_histogram(rows, 4)
    expected_counts, expected_edges = np.histogram([2.0] * 4, bins=4)
    np.testing.assert_array_equal(counts[0].numpy(), expected_counts)
    np.testing.assert_allclose(edges[0].numpy(), expected_edges)
    np.testing.assert_array_equal(counts[1].numpy(), np.histogram([0.0, 1.0], bins=4)[0])


@pytest.mark.parametrize("bins", [3, 6, 10])
def test_values_on_bin_edges_fall_where_numpy_puts_them(bins):
    """Values on a multiple of 0.1, and constants: within a rounding error of an edge, where float32
    arithmetic decides the bin. Each row's counts and edges equal numpy.histogram's of that row alone."""
    rng = np.random.default_rng(bins)
    rows = [np.float32([0, .2, .3, .6])] + [(rng.integers(-5, 6, 12) / 10).astype(np.float32) for _ in range(200)]
    rows += [np.full(4, value, np.float32) for value in (0.3, -0.7, 0.1, 1e-3, 12.345)]
    width = max(len(row) for row in rows)
    for row in rows:
        padded = np.concatenate([row, np.full(width - len(row), np.nan, np.float32)])  # not counted
        counts, edges = batch_histogram(torch.from_numpy(padded)[None], bins)
        expected_counts, expected_edges = np.histogram(row, bins=bins)
        np.testing.assert_array_equal(counts[0].numpy(), expected_counts, err_msg=str(row))
        np.testing.assert_array_equal(edges[0].numpy(), expected_edges.astype(np.float32), err_msg=str(row))


def test_nan_activations_are_counted_not_hidden(tmp_path):
    class Planted(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.Identity()

        def forward(self, inputs):
            x = inputs["image"].clone()
            x[0, 0, 0, 0] = float("nan")
            return {"logits": self.layer(x).flatten(1)[:, :6]}

    outputs = capture_epoch(Planted(), torch.ones(2, 3, 4, 4), tmp_path, 2,
                            [entry("st", ActivationStatsDebugger, layer_name="layer")])
    assert outputs[0]["st"]["nonfinite_ratio"] == pytest.approx(1 / 48)
    assert np.isnan(outputs[0]["st"]["mean"])
    assert outputs[1]["st"]["nonfinite_ratio"] == 0 and outputs[1]["st"]["mean"] == 1
    assert outputs[0]["st"]["histogram"].sum() == 47
