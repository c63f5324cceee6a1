"""Figures for every output kind: the right traces holding the right data."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from debuggers.activation_stats_debugger import ActivationStatsDebugger
from debuggers.attention_debugger import AttentionDebugger
from debuggers.capture_debugger import CaptureDebugger
from debuggers.feature_map_debugger import FeatureMapDebugger
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.gradient_flow_debugger import GradientFlowDebugger
from debuggers.layer_output_debugger import LayerOutputDebugger
from debuggers.model_report import build_model_report
from debuggers.nan_inf_debugger import NaNInfDebugger
from models import AttentionClassifier, SmallCNN
from runners.eval_viewer.figures.attention import attention_across_layers_figures
from runners.eval_viewer.figures.base import MAX_PANELS, display_image, grid_tile, pca_rgb
from runners.eval_viewer.figures.context import DrawContext
from runners.eval_viewer.figures.registry import output_figures
from runners.eval_viewer.model_report.figures import model_report_figures
from tests.debuggers.library import capture_epoch, entry


@pytest.fixture(scope="module")
def cnn_images():
    torch.manual_seed(0)
    return torch.randn(2, 3, 16, 16)


@pytest.fixture(scope="module")
def cnn_outputs(cnn_images, tmp_path_factory):
    torch.manual_seed(0)
    model = SmallCNN(widths=(4, 4, 8, 20)).eval()
    return capture_epoch(model, cnn_images, tmp_path_factory.mktemp("cnn"), 2, [
        entry("fm", FeatureMapDebugger, layer_name="backbone.layer4"),
        entry("st", ActivationStatsDebugger, layer_name="backbone.layer3", histogram_bins=8),
        entry("lo", LayerOutputDebugger, layer_name="backbone.layer1", downsample_factor=2),
        entry("cam", GradCAMDebugger, target_layer="backbone.layer4"),
        entry("nan", NaNInfDebugger), entry("gf", GradientFlowDebugger)])


@pytest.fixture(scope="module")
def attention_outputs(tmp_path_factory):
    torch.manual_seed(0)
    model = AttentionClassifier(patch_size=4, dim=16, depth=2, num_heads=2).eval()
    return capture_epoch(model, torch.randn(2, 3, 16, 16), tmp_path_factory.mktemp("att"), 2, [
        entry("att", AttentionDebugger, layer_name="blocks.0.attn"), entry("cap", CaptureDebugger)])[0]


def traces(fig, kind):
    return [t for t in fig.data if isinstance(t, kind)]


def test_feature_map_grid_shows_the_strongest_channels(cnn_outputs):
    out = cnn_outputs[1]["fm"]
    (fig,) = output_figures(out)
    assert len(traces(fig, go.Heatmap)) == 1 and len(fig.layout.meta["tiles"]) == MAX_PANELS  # 20 channels, capped
    strongest = np.argsort(-out["feature_map"].mean(axis=(1, 2)), kind="stable")
    for panel in (0, MAX_PANELS - 1):
        np.testing.assert_allclose(grid_tile(fig, panel), out["feature_map"][strongest[panel]])
    assert fig.layout.annotations[0].text == f"ch {strongest[0]}"


def test_statistics_table_and_histogram(cnn_outputs):
    out = cnn_outputs[0]["st"]
    table, histogram, channels = output_figures(out)
    cells = dict(zip(*traces(table, go.Table)[0].cells.values))
    assert cells["mean"] == f"{out['mean']:.6g}" and "l2_norm" in cells
    bar = traces(histogram, go.Bar)[0]
    np.testing.assert_array_equal(bar.y, out["histogram"])
    np.testing.assert_allclose(np.asarray(bar.x) - np.asarray(bar.width) / 2, out["histogram_edges"][:-1])
    np.testing.assert_allclose(traces(channels, go.Bar)[0].y, out["channel_means"])


def test_layer_output_heatmaps(cnn_outputs):
    out = cnn_outputs[0]["lo"]
    (fig,) = output_figures(out)
    assert len(fig.layout.meta["tiles"]) == out["output"].shape[0]
    np.testing.assert_allclose(grid_tile(fig, 2), out["output"][2])


def test_cam_heatmap_over_the_image(cnn_images, cnn_outputs):
    images, out = cnn_images, cnn_outputs[1]["cam"]
    (fig,) = output_figures(out, DrawContext(image=images[1].numpy()))
    maps = [out["cam"]] + ([out["other_target"]["cam"]] if out.get("other_target") is not None else [])
    pictures, heat = traces(fig, go.Image), traces(fig, go.Heatmap)
    assert len(pictures) == len(heat) == len(maps)  # each map over its own copy of the image
    assert sum(np.array_equal(h.z, out["cam"]) for h in heat) == 1
    for picture in pictures:
        np.testing.assert_array_equal(picture.z, display_image(images[1].numpy()))
    (alone,) = output_figures(out)
    assert not traces(alone, go.Image) and any(np.array_equal(h.z, out["cam"]) for h in traces(alone, go.Heatmap))


def test_nan_origin_list_highlights_the_first_module():
    out = {"kind": "nan_origin", "first_module": "log", "module_type": "Log", "input_min": -3.0, "input_max": 1.5,
           "bad_modules": ["log", "head", "(model)"], "modules_checked": 9}
    (fig,) = output_figures(out)
    table = traces(fig, go.Table)[0]
    assert list(table.cells.values[0]) == ["log", "head", "(model)"]
    assert "input range [-3, 1.5]" in table.cells.values[1][0]
    assert table.cells.fill.color[0][0] != table.cells.fill.color[0][1]
    (clean,) = output_figures({**out, "first_module": None, "bad_modules": []})
    assert "no NaN or Inf" in traces(clean, go.Table)[0].cells.values[1][0]


def test_gradient_flow_bars_colour_flagged_layers(cnn_outputs):
    (fig,) = output_figures(cnn_outputs[0]["gf"])
    assert [t.name for t in traces(fig, go.Bar)] == ["ok"]
    flagged = {"kind": "gradient_flow", "layers": ["a", "b", "c"], "grad_norms": np.array([0.5, 0.0, 0.0]),
               "missing": np.array([False, True, False]), "zero": np.array([False, False, True]),
               "frozen": [False, False, False]}
    (fig,) = output_figures(flagged)
    bars = {t.name: t for t in traces(fig, go.Bar)}
    assert set(bars) == {"ok", "zero", "missing"}
    assert list(bars["missing"].x) == ["b"] and list(bars["zero"].customdata) == [0.0]
    assert bars["missing"].marker.color != bars["ok"].marker.color
    assert fig.layout.yaxis.type == "log"


def test_attention_heads_and_entropy(attention_outputs):
    out = attention_outputs["att"]
    heads, entropy = output_figures(out)
    assert len(heads.layout.meta["tiles"]) == 2
    np.testing.assert_allclose(grid_tile(heads, 1), out["attention"][1])
    np.testing.assert_allclose(traces(entropy, go.Bar)[0].y, out["entropy_per_head"])


def test_captured_states_are_drawn_by_kind(attention_outputs):
    out = attention_outputs["cap"]
    figures = output_figures(out)
    titles = [f.layout.title.text for f in figures]
    embedding = figures[titles.index("patch_embed.embeddings: top-3 principal components as RGB")]
    np.testing.assert_array_equal(traces(embedding, go.Image)[0].z,
                                  pca_rgb(out["states"]["patch_embed"]["embeddings"]["data"]))
    assert any(t.startswith("pos_embed.position_encoding") and "principal" in t for t in titles)
    attention = figures[titles.index("blocks.1.attn.attention_weights")]
    np.testing.assert_allclose(grid_tile(attention, 0),
                               out["states"]["blocks.1.attn"]["attention_weights"]["data"][0])


def test_pca_matches_an_eigendecomposition():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(6, 5, 7))
    samples = features.reshape(6, -1).T
    samples = samples - samples.mean(0)
    values, vectors = np.linalg.eigh(samples.T @ samples)
    first = samples @ vectors[:, np.argmax(values)]
    scaled = np.round((first - first.min()) / (first.max() - first.min()) * 255).reshape(5, 7)
    red = pca_rgb(features)[:, :, 0].astype(float)
    assert np.abs(red - scaled).max() <= 1 or np.abs(red - (255 - scaled)).max() <= 1  # up to the sign


@pytest.mark.parametrize("image", [np.zeros((3, 4, 5)), np.zeros((4, 5, 3)), np.zeros((4, 5))])
def test_display_image_accepts_channel_first_last_and_grey(image):
    image[1, 2] = 2.0
    shown = display_image(image)
    assert shown.shape == (4, 5, 3) and shown.dtype == np.uint8 and shown.max() == 255


def test_records_give_no_figure_and_unknown_outputs_a_generic_one():
    assert output_figures({"kind": "error", "type": "ValueError", "message": "x", "traceback": ""}) == []
    assert output_figures({"kind": "not_run", "message": "x"}) == []
    figures = output_figures({"energy": np.arange(8.0), "map": np.ones((3, 4)), "top": 3, "name": "a",
                              "nested": {"values": np.arange(200.0), "k": 0.5}})
    kinds = [type(f.data[0]).__name__ for f in figures]
    assert kinds == ["Table", "Bar", "Heatmap", "Histogram"]
    assert list(figures[0].data[0].cells.values[0]) == ["output.top", "output.name", "output.nested.k"]


def test_model_report_figures():
    model = SmallCNN(widths=(4, 4, 4, 4))
    report = build_model_report(model, {"image": torch.randn(1, 3, 16, 16)})
    summary, table, bars, shapes, *filters = model_report_figures(report)
    assert str(report["parameters"]["total"]) in list(traces(summary, go.Table)[0].cells.values[1])
    cells = traces(table, go.Table)[0].cells.values
    assert list(cells[0]) == [layer["name"] for layer in report["layers"]]
    assert cells[5][0] == "[1, 4, 16, 16]" and cells[6][0] == "float32"  # backbone.layer1.conv's output
    params, flops = traces(bars, go.Bar)
    assert list(params.y) == [layer["parameters"] for layer in report["layers"]]
    assert list(flops.y) == [layer["flops"] for layer in report["layers"]]
    assert list(traces(shapes, go.Table)[0].cells.values[0]) == [m["name"] for m in report["module_shapes"]]
    assert len(filters) == 4


def test_conv_filters_are_drawn_as_the_chapter_draws_them():
    model = SmallCNN(widths=(4, 4, 4, 4))
    report = build_model_report(model, {"image": torch.randn(1, 3, 16, 16)})
    rgb, *channel_zero = model_report_figures(report)[4:]
    weights = model.backbone.layer1.conv.weight.detach().numpy()  # (4, 3, 3, 3): four RGB pictures
    scaled = np.round((weights - weights.min()) / (weights.max() - weights.min()) * 255)
    picture = np.asarray(traces(rgb, go.Image)[0].z)
    for i, (top, left, height, width) in enumerate(rgb.layout.meta["tiles"]):
        np.testing.assert_array_equal(picture[top:top + height, left:left + width], scaled[i].transpose(1, 2, 0))
    assert "RGB" in rgb.layout.title.text and "start-up" in rgb.layout.title.text
    second = model.backbone.layer2.conv.weight.detach().numpy()[:, 0]  # input channel 0, as the chapter
    for i in range(4):
        np.testing.assert_allclose(grid_tile(channel_zero[0], i), second[i], rtol=1e-6)


def test_a_malformed_filter_entry_is_named_not_drawn():
    report = {"parameters": {}, "layers": [], "conv_filters": [{"layer": "conv1", "rgb": True, "filters": [[1, 2]]}]}
    note = model_report_figures(report)[-1]
    assert list(traces(note, go.Table)[0].cells.values[1]) == ["conv1", "filters of shape (1, 2)"]


def test_one_attention_figure_across_every_captured_layer(attention_outputs):
    (figure,) = attention_across_layers_figures(attention_outputs)  # all self-attention of 17 tokens: one figure
    states = attention_outputs["cap"]["states"]
    expected = [attention_outputs["att"]["attention"], states["blocks.0.attn"]["attention_weights"]["data"],
                states["blocks.1.attn"]["attention_weights"]["data"]]  # the scores before the softmax left out
    assert [a.text for a in figure.layout.annotations] == ["att", "blocks.0.attn", "blocks.1.attn"]
    assert figure.layout.title.text.startswith("self-attention across 3 layers, 16 tokens")
    for i, weights in enumerate(expected):
        np.testing.assert_allclose(grid_tile(figure, i), weights.mean(axis=0), rtol=1e-6)
    assert attention_across_layers_figures({"att": attention_outputs["att"]}) == []  # one layer: its own figure
