"""FeatureMapDebugger against an independent forward pass and NumPy statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from debuggers.feature_map_debugger import FeatureMapDebugger
from tests.debuggers.library import capture_epoch, entry, make_batch, run_batches_with_columns
from utils.errors import ConfigError


@pytest.fixture
def images():
    torch.manual_seed(1)
    return torch.randn(6, 3, 16, 16)


def layer3(model, images):
    with torch.no_grad():
        return model.backbone.layer3(model.backbone.layer2(model.backbone.layer1(images))).numpy()


def test_maps_and_statistics_match_an_independent_computation(model, images, tmp_path):
    outputs = capture_epoch(model, images, tmp_path, 4,
                            [entry("fm", FeatureMapDebugger, layer_name="backbone.layer3")])
    expected = layer3(model, images)
    for i in range(len(images)):
        out = outputs[i]["fm"]
        assert out["kind"] == "feature_map" and out["layer_name"] == "backbone.layer3"
        assert out["shape"] == [8, 2, 2]
        np.testing.assert_allclose(out["feature_map"], expected[i], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(out["channel_indices"], np.arange(8))
        for name, fn in {"mean": np.mean, "std": np.std, "min": np.min, "max": np.max}.items():
            assert out["stats"][name] == pytest.approx(float(fn(expected[i])), rel=1e-5, abs=1e-6)


def test_max_channels_keeps_the_strongest_channels_of_each_datapoint(model, images, tmp_path):
    outputs = capture_epoch(model, images, tmp_path, 3,
                            [entry("fm", FeatureMapDebugger, layer_name="backbone.layer3", max_channels=3)])
    expected = layer3(model, images)
    for i in range(len(images)):
        strongest = np.argsort(-expected[i].mean(axis=(1, 2)), kind="stable")[:3]
        out = outputs[i]["fm"]
        assert sorted(out["channel_indices"].tolist()) == sorted(strongest.tolist())
        np.testing.assert_allclose(out["feature_map"], expected[i][out["channel_indices"]], rtol=1e-5, atol=1e-6)
        assert out["stats"]["mean"] == pytest.approx(float(expected[i].mean()), rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("layer, shown", [("head.fc", "Tensor(2, 6)"), ("head.flatten", "Tensor(2, 8)")])
def test_an_output_that_is_not_a_map_is_a_clear_recorded_error(model, images, tmp_path, layer, shown):
    outputs = capture_epoch(model, images[:2], tmp_path, 2, [entry("fm", FeatureMapDebugger, layer_name=layer)])
    record = outputs[0]["fm"]
    assert record["kind"] == "error"
    assert f"(B, C, H, W) feature map from layer '{layer}', which returned {shown}" in record["message"]


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_max_channels_must_be_a_positive_int(bad):
    with pytest.raises(ConfigError, match="max_channels"):
        FeatureMapDebugger("backbone.layer4", max_channels=bad)


def test_a_layer_compiled_before_the_hooks_says_why_it_seems_not_to_run(model, images, tmp_path):
    """Code torch.compile made before the debugger attached calls no hook: the record says so and what to do,
    and doing it (torch._dynamo.reset()) captures the layer's output."""
    class Compiled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = model
            self.compiled = torch.compile(model, backend="eager")

        def forward(self, inputs):
            return self.compiled(inputs)

    wrapper = Compiled().eval()
    with torch.no_grad():
        wrapper({"image": images[:4]})  # compiled before any hook
    debuggers = [entry("fm", FeatureMapDebugger, layer_name="net.backbone.layer3")]
    try:
        stale = capture_epoch(wrapper, images[:4], tmp_path / "stale", 4, debuggers)
        assert stale[0]["fm"]["kind"] == "not_run"
        assert "compiled with torch.compile" in stale[0]["fm"]["message"]
        assert "torch._dynamo.reset()" in stale[0]["fm"]["message"]
        torch._dynamo.reset()
        fresh = capture_epoch(wrapper, images[:4], tmp_path / "fresh", 4, debuggers)
    finally:
        torch._dynamo.reset()
    np.testing.assert_allclose(fresh[0]["fm"]["feature_map"], layer3(model, images[:1])[0], rtol=1e-5, atol=1e-6)


class Maps(torch.nn.Module):
    """The images themselves as the feature maps of a layer ``maps``."""

    def __init__(self):
        super().__init__()
        self.maps = torch.nn.Identity()

    def forward(self, inputs):
        return {"logits": self.maps(inputs["image"]).flatten(1)[:, :6]}


def maps_of_every_kind() -> torch.Tensor:
    """(7, 4, 5, 6) float32 maps: plain, far from zero against their spread (where sums of squares lose the std),
    constant, half zero with a channel of values whose squares underflow, with a NaN, with an inf, all zero."""
    torch.manual_seed(3)
    maps = torch.randn(7, 4, 5, 6)
    maps[1] = 1e4 + maps[1] * 1e-2
    maps[2] = -7.25
    maps[3, :2] = 0
    maps[3, 1, 0, 0] = 1e-30
    maps[4, 2, 1, 1] = math.nan
    maps[5, 0, 0, 0] = math.inf
    maps[6] = 0
    return maps


class UndeclaredFeatureMaps(FeatureMapDebugger):
    """A subclass that declares no batch mode: its first batch also runs each datapoint alone, after the batch."""

    batch_mode = None


@pytest.mark.parametrize("debugger", [FeatureMapDebugger, UndeclaredFeatureMaps])
def test_statistics_and_summaries_of_maps_of_every_kind_match_numpy(tmp_path, debugger):
    """The statistics come from each channel's sum and sum of squares, or two passes where those lose precision:
    each equals NumPy's float64 computation on every kind of map, the epoch table's columns too (also where the
    datapoints alone ran last, whose sums are not the batch's)."""
    maps = maps_of_every_kind()
    _, pages, columns = run_batches_with_columns(
        Maps().eval(), [make_batch(maps, range(4)), make_batch(maps, range(4, 7))], tmp_path,
        [entry("fm", debugger, layer_name="maps")])
    with np.errstate(invalid="ignore"):
        for i, x in enumerate(maps.double().numpy()):
            channels = x.reshape(4, -1)
            expected = {"mean": x.mean(), "std": x.std(), "min": x.min(), "max": x.max(), "energy": (x ** 2).mean(),
                        "dead_channel_fraction": (~channels.any(1)).mean(),
                        "strongest_channel": np.argmax(channels.mean(1))}
            for key, value in expected.items():
                got = pages[i]["fm"]["stats"][key] if key in pages[i]["fm"]["stats"] else columns[f"fm.{key}"][i]
                np.testing.assert_allclose([got, columns[f"fm.{key}"][i]], [value, value], rtol=2e-6, atol=1e-30,
                                           err_msg=f"datapoint {i}: {key}")
