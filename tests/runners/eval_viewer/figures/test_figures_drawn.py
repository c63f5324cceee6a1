"""What the viewer draws, inspected as figure objects: Grad-CAM of label and prediction by class name,
comparison rows (aligned channels, shared scales, differences), labelled log ticks, tables without a gap,
class badges; on real debugger outputs and a real two-epoch run."""

from __future__ import annotations

import base64
import io
import math
import re
import shutil
from xml.etree import ElementTree

import numpy as np
import PIL.Image
import plotly.colors
import plotly.graph_objects as go
import plotly.io as pio
import pytest
import torch

from debuggers.activation_stats_debugger import ActivationStatsDebugger
from debuggers.attention_debugger import AttentionDebugger
from debuggers.capture_debugger import CaptureDebugger
from debuggers.feature_map_debugger import FeatureMapDebugger
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.gradient_flow_debugger import GradientFlowDebugger
from models import AttentionClassifier, SmallCNN
from runners.eval_viewer.compare_epochs.display_compare import CompareColumn, display_compare
from runners.eval_viewer.compare_epochs.view import epoch_columns
from runners.eval_viewer.datapoint.display_debug_outputs import display_debug_outputs, drawn_figure
from runners.eval_viewer.datapoint.view import render_datapoint
from runners.eval_viewer.figures.attention import attention_heads_figure, patch_attention
from runners.eval_viewer.figures.base import (
    MAX_PANELS,
    SHARED,
    display_image,
    grid_tile,
    is_picture,
    is_shared,
    table_height,
)
from runners.eval_viewer.figures.compare import aligned_channels, compare_figures
from runners.eval_viewer.figures.components import image_component, key_value_table, picture_component
from runners.eval_viewer.figures.context import DrawContext
from runners.eval_viewer.figures.gradients import log_ticks
from runners.eval_viewer.figures.registry import output_figures
from runners.eval_viewer.figures.values import as_image
from runners.eval_viewer.scores.data import history_data
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.datapoint import load_datapoint
from runners.eval_viewer.shared.elements import alert, badge
from tests.debuggers.library import capture_epoch, entry
from tests.pictures import feature_map_colours, mosaic_maps, png_pixels, sampled_colours
from tests.runs import REPO_ROOT, train, write_config

SVG = "{http://www.w3.org/2000/svg}"
NAMES = {0: "circle", 1: "square", 2: "triangle", 3: "cross", 4: "ring", 5: "bar"}
DEBUGGERS = [entry("cam", GradCAMDebugger, target_layer="backbone.layer4"),
             entry("fm", FeatureMapDebugger, layer_name="backbone.layer3"),
             entry("st", ActivationStatsDebugger, layer_name="backbone.layer3", histogram_bins=8),
             entry("gf", GradientFlowDebugger)]


def traces(fig, kind):
    return [t for t in fig.data if isinstance(t, kind)]


def _capture(seed, tmp_path, labels=None):
    torch.manual_seed(seed)
    model = SmallCNN(widths=(4, 8, 20, 8)).eval()  # layer3: 20 channels, more than a grid shows
    images = torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        predicted = model({"image": images})["logits"].argmax(1)
    labels = predicted.clone() if labels is None else labels
    labels[1] = (predicted[1] + 1) % 6  # datapoint 1 is predicted wrong
    return capture_epoch(model, images, tmp_path, 4, DEBUGGERS, labels=labels), images, labels, predicted


@pytest.fixture(scope="module")
def epochs(tmp_path_factory):
    """The same four datapoints seen by two differently initialised models (two 'epochs')."""
    first = _capture(0, tmp_path_factory.mktemp("a"))
    second = _capture(5, tmp_path_factory.mktemp("b"), labels=first[2].clone())
    return first, second


def test_grad_cam_of_a_wrong_prediction_shows_label_and_prediction_by_class_name(epochs):
    outputs, images, labels, predicted = epochs[0]
    out = outputs[1]["cam"]
    (fig,) = output_figures(out, DrawContext(image=images[1].numpy(), class_names=NAMES))
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [f"label: {NAMES[int(labels[1])]}", f"prediction: {NAMES[int(predicted[1])]}"]
    heat = traces(fig, go.Heatmap)
    np.testing.assert_array_equal(heat[0].z, out["other_target"]["cam"])  # the label's cam first
    np.testing.assert_array_equal(heat[1].z, out["cam"])
    assert len(traces(fig, go.Image)) == 2 and heat[0].xaxis != heat[1].xaxis  # side by side, each over the image


def test_grad_cam_of_a_right_prediction_is_one_map_titled_by_both(epochs):
    outputs, _, labels, _ = epochs[0]
    (fig,) = output_figures(outputs[0]["cam"], DrawContext(class_names=NAMES))
    assert [a.text for a in fig.layout.annotations] == [f"label and prediction: {NAMES[int(labels[0])]}"]
    (unnamed,) = output_figures(outputs[0]["cam"])
    assert unnamed.layout.annotations[0].text == f"label and prediction: class {int(labels[0])}"


def test_compared_feature_maps_show_the_same_channels_on_one_scale_and_their_difference(epochs):
    first, second = epochs[0][0][2]["fm"], epochs[1][0][2]["fm"]
    (row,) = compare_figures([first, second])
    a, b, difference = row
    channels = aligned_channels([first, second])
    assert len(channels) == MAX_PANELS
    assert [t.text for t in a.layout.annotations] == [t.text for t in b.layout.annotations] == \
        [f"ch {c}" for c in channels]
    for panel, channel in enumerate(channels):
        np.testing.assert_allclose(grid_tile(a, panel), first["feature_map"][channel])
        np.testing.assert_allclose(grid_tile(b, panel), second["feature_map"][channel])
    both = np.concatenate([first["feature_map"][channels].ravel(), second["feature_map"][channels].ravel()])
    assert a.data[0].zmin == b.data[0].zmin == pytest.approx(both.min())
    assert a.data[0].zmax == b.data[0].zmax == pytest.approx(both.max())
    change = np.asarray(difference.data[0].z)
    np.testing.assert_allclose(change, np.asarray(b.data[0].z) - np.asarray(a.data[0].z))
    assert difference.data[0].zmid == 0 and difference.data[0].zmin == -difference.data[0].zmax
    assert difference.data[0].zmax == pytest.approx(np.nanmax(np.abs(change)))



def test_compared_grad_cam_titles_break_after_their_role_to_fit_narrow_columns(epochs):
    wrong = [epochs[0][0][1]["cam"], epochs[1][0][1]["cam"]]  # datapoint 1 is predicted wrong
    named = DrawContext(class_names=NAMES)
    drawn = [[note.text for note in output_figures(out, named)[0].layout.annotations] for out in wrong]
    (row,) = compare_figures(wrong, [named] * 2)
    svgs = [svg for fig in row if fig is not None for _, svg in _pictures(drawn_figure(fig, "compare-figure"))]
    assert len(svgs) >= 2  # both columns (and their difference, where both show the same classes), each a picture
    for svg, titles in zip(svgs, drawn):
        assert len(titles) == 2 and titles[0].startswith("label: ")
        assert [text.text for text in svg.iter(f"{SVG}text")][:4] == \
            [part for title in titles for part in (title.split(": ")[0] + ":", title.split(": ")[1])]
    assert len({svg.get("viewBox") for svg in svgs}) == 1  # one size: a map is compared at the same scale

def test_channels_are_aligned_where_each_column_kept_other_channels():
    fmap = np.arange(3 * 2 * 2, dtype=np.float64).reshape(3, 2, 2)
    first = {"kind": "feature_map", "feature_map": fmap, "channel_indices": np.array([7, 2, 5])}
    second = {"kind": "feature_map", "feature_map": fmap[::-1] * 2, "channel_indices": np.array([5, 9, 7])}
    assert aligned_channels([first, second]) == [5, 7]  # held by both; 5 is the strongest (mean 22 in second)
    a, b, _ = compare_figures([first, second])[0]
    assert [t.text for t in a.layout.annotations] == [t.text for t in b.layout.annotations] == ["ch 5", "ch 7"]
    np.testing.assert_allclose(grid_tile(b, 0), fmap[2] * 2)  # channel 5 sits first in the second column
    np.testing.assert_allclose(grid_tile(a, 0), fmap[2])
    assert [len(row) for row in compare_figures([first])] == [1]  # one column: nothing to subtract


def test_compared_bars_and_histograms_share_their_axes(epochs):
    first, second = epochs[0][0][0]["st"], epochs[1][0][0]["st"]
    table, histogram, means = compare_figures([first, second])
    assert table[2] is None  # a table has no difference
    a, b = histogram[:2]
    assert list(a.layout.xaxis.range) == list(b.layout.xaxis.range)
    low = min(first["histogram_edges"][0], second["histogram_edges"][0])
    high = max(first["histogram_edges"][-1], second["histogram_edges"][-1])
    assert a.layout.xaxis.range[0] <= low and a.layout.xaxis.range[1] >= high
    assert list(a.layout.yaxis.range) == list(b.layout.yaxis.range)
    a, b, difference = means
    assert list(a.layout.yaxis.range) == list(b.layout.yaxis.range)
    np.testing.assert_allclose(difference.data[0].y, second["channel_means"] - first["channel_means"])


def test_compared_gradient_flow_shares_its_log_axis(epochs):
    first, second = epochs[0][0][0]["gf"], epochs[1][0][0]["gf"]
    a, b, _ = compare_figures([first, second])[0]
    assert a.layout.yaxis.type == "log" and list(a.layout.yaxis.range) == list(b.layout.yaxis.range)
    norms = np.concatenate([first["grad_norms"], second["grad_norms"]])
    assert a.layout.yaxis.range[0] <= math.log10(norms[norms > 0].min())
    assert a.layout.yaxis.range[1] >= math.log10(norms.max())


@pytest.mark.parametrize("low, high, expected", [
    (0.26, 5.1, [0.5, 1, 2, 5]),
    (1e-7, 30, [1e-7, 1e-5, 1e-3, 0.1, 10]),  # 10 decades: every other one
    (0.31, 0.42, [0.31, 0.42]),
])
def test_log_axis_labels_only_1_2_5_or_powers_of_ten(low, high, expected):
    np.testing.assert_allclose(log_ticks(low, high), expected, rtol=1e-9)


def test_gradient_flow_labels_its_log_axis_sparsely(epochs):
    out = epochs[0][0][0]["gf"]
    (fig,) = output_figures(out)
    norms = np.asarray(out["grad_norms"])
    assert list(fig.layout.yaxis.tickvals) == log_ticks(norms.min(), norms.max())
    assert len(fig.layout.yaxis.tickvals) <= 9
    assert all(f"{t:.0e}"[0] in "125" for t in fig.layout.yaxis.tickvals)


def test_statistics_table_is_as_tall_as_its_rows(epochs):
    table = output_figures(epochs[0][0][0]["st"])[0]
    rows = len(traces(table, go.Table)[0].cells.values[0])
    assert table.layout.height == table_height(rows)
    assert table.layout.height < 120 + 28 * rows  # the old height, which left a blank gap



def test_figures_have_fixed_margins_and_no_per_trace_template(epochs):
    """A colour bar or tick label must not make the browser lay a figure out twice, nor every figure carry
    plotly's 4 kB template of per-trace defaults."""
    outputs = epochs[0][0][1]
    for fig in [fig for name in ("cam", "fm", "st") for fig in output_figures(outputs[name])]:
        assert fig.layout.margin.autoexpand is False
        assert not fig.layout.template.data.to_plotly_json()
        if any(isinstance(trace, go.Heatmap) and trace.showscale is not False for trace in fig.data):
            assert fig.layout.margin.r >= 80  # the colour bar's room
    flow = output_figures(outputs["gf"])[0]
    assert flow.layout.margin.autoexpand is True  # layer names on the axis: the margin fits them


def test_the_viewer_draws_tables_as_text_with_the_figure_s_cells(epochs):
    output = epochs[0][0][1]["st"]
    table = drawn_figure(output_figures(output)[0], "debug-figure")
    assert type(table).__name__ == "Figure" and "table-figure" in table.className
    (text,) = [node.children for node in _walk(table) if type(node).__name__ == "Pre"]
    rows = [re.split(r"\s{2,}", line, maxsplit=1) for line in text.splitlines()]
    assert rows[0] == ["statistic", "value"]
    drawn_apart = {"kind", "layer_name", "histogram", "histogram_edges", "sample_values", "channel_means",
                   "channel_stds"}
    expected = {key: f"{value:.6g}" if isinstance(value, float) else str(value) for key, value in output.items()
                if key not in drawn_apart}
    assert dict(rows[1:]) == expected
    graph = drawn_figure(output_figures(output)[1], "debug-figure")
    assert "lazy-graph" in graph.className  # a graph, drawn when it comes into view


def test_an_input_image_is_a_png_of_its_min_max_scaled_pixels():
    rng = np.random.default_rng(3)
    chw = rng.normal(size=(3, 5, 7)).astype(np.float32)
    shown = image_component(as_image(chw), "image")
    source = next(node for node in _walk(shown) if type(node).__name__ == "Img").src
    assert source.startswith("data:image/png;base64,")
    decoded = np.asarray(PIL.Image.open(io.BytesIO(base64.b64decode(source.split(",", 1)[1]))))
    expected = np.round((chw - chw.min()) / (chw.max() - chw.min()) * 255).transpose(1, 2, 0)
    np.testing.assert_array_equal(decoded, expected.astype(np.uint8))

# ------------------------------------------------------------------ a real run, two debug epochs
RUN_DEBUGGERS = """
from debuggers.feature_map_debugger import FeatureMapDebugger
from debuggers.gradcam_debugger import GradCAMDebugger
config["debugger"] = {"class": SequentialDebugger, "args": {"debuggers_config": [
    {"name": "features", "debugger_config": {"class": FeatureMapDebugger, "args": {"layer_name": "backbone.layer4"}}},
    {"name": "gradcam", "debugger_config": {"class": GradCAMDebugger, "args": {"target_layer": "backbone.layer4"}}}]}}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("figures_run")
    work_dir = train(write_config(root / "run.py", root / "logs" / "run", epochs=2, checkpoint_method=1,
                                  train_size=32, val_size=12, extra=RUN_DEBUGGERS))
    backend = ViewerBackend([str(root / "logs")])
    return backend, backend.run(work_dir)


def _texts(component) -> list[str]:
    """Every string in a Dash component tree."""
    if isinstance(component, str):
        return [component]
    children = getattr(component, "children", None)
    if isinstance(component, (list, tuple)):
        return [text for child in component for text in _texts(child)]
    return _texts(children) if children is not None else []


def _graphs(component) -> list:
    if isinstance(component, (list, tuple)):
        return [graph for child in component for graph in _graphs(child)]
    if type(component).__name__ == "Graph":
        return [component]
    children = getattr(component, "children", None)
    return _graphs(children) if children is not None else []


def _pictures(component) -> list[tuple[str, ElementTree.Element]]:
    """The picture figures in a component tree: their title and their SVG."""
    found = []
    for node in _walk(component):
        if type(node).__name__ == "Figure" and "picture-figure" in (node.className or ""):
            caption, image = node.children
            found.append((caption.children, ElementTree.fromstring(base64.b64decode(image.src.split(",", 1)[1]))))
    return found


def _lazy_figures(component) -> list[go.Figure]:
    """The figures of the graphs the page draws when in view, in a component tree."""
    nodes = [node for part in (component if isinstance(component, list) else [component]) for node in _walk(part)]
    return [pio.from_json(node.to_plotly_json()["props"]["data-figure"]) for node in nodes
            if "lazy-graph" in (getattr(node, "className", None) or "")]


def _decoded(values) -> np.ndarray:
    """An array as a figure's JSON holds it: plotly's typed array (``dtype``, base64 ``bdata``, ``shape``) or a list."""
    if isinstance(values, dict):
        flat = np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"])
        return flat.reshape([int(side) for side in str(values.get("shape", flat.size)).split(",")])
    return np.asarray(values)


def _figure_titles(components: list) -> list[str]:
    """The title of every figure in component trees, graph (drawn at once or when in view) or picture, in order."""
    titles = []
    for node in (node for component in components for node in _walk(component)):
        if type(node).__name__ == "Graph":
            titles.append(str(go.Figure(node.figure).layout.title.text))
        elif "lazy-graph" in (getattr(node, "className", None) or ""):  # drawn by the page when in view
            titles.append(str(pio.from_json(node.to_plotly_json()["props"]["data-figure"]).layout.title.text))
        elif type(node).__name__ == "Figure" and "picture-figure" in (node.className or ""):
            titles.append(node.children[0].children)
    return titles


def test_feature_maps_are_one_picture_of_every_channel_in_the_figure_ssampled_colours(epochs):
    (fig,) = output_figures(epochs[0][0][2]["fm"])
    assert is_picture(fig)
    ((title, svg),) = _pictures(display_debug_outputs({"fm": epochs[0][0][2]["fm"]}))
    assert title == fig.layout.title.text
    texts = [text.text for text in svg.iter(f"{SVG}text")]
    assert texts[:MAX_PANELS] == [a.text for a in fig.layout.annotations]  # each channel's caption
    z = np.asarray(fig.data[0].z, dtype=np.float64)
    low, high = np.nanmin(z), np.nanmax(z)
    assert texts[MAX_PANELS:] == [*(f"{v:.3g}" for v in (high, (low + high) / 2, low)), "activation"]  # the bar
    (image,) = svg.iter(f"{SVG}image")
    pixels = png_pixels(image.get("href"))
    assert pixels.shape == (*z.shape, 4)
    finite = np.isfinite(z)
    np.testing.assert_array_equal(pixels[..., 3], np.where(finite, 255, 0))  # the gaps between maps are clear
    expected = sampled_colours(fig.data[0].colorscale, (z[finite] - low) / (high - low))
    np.testing.assert_allclose(pixels[..., :3][finite], expected, atol=1)
    for i in range(MAX_PANELS):  # each map where the figure's tiles put it
        top, left, height, width = fig.layout.meta["tiles"][i]
        np.testing.assert_array_equal(z[top:top + height, left:left + width], grid_tile(fig, i))


def test_grad_cam_is_a_picture_of_both_maps_over_the_input_image(epochs):
    outputs, images, labels, predicted = epochs[0]
    out = outputs[1]["cam"]
    (fig,) = output_figures(out, DrawContext(image=images[1].numpy(), class_names=NAMES))
    ((_, svg),) = _pictures(picture_component(fig, "debug-figure"))
    assert [text.text for text in svg.iter(f"{SVG}text")][:2] == [f"label: {NAMES[int(labels[1])]}",
                                                                   f"prediction: {NAMES[int(predicted[1])]}"]
    picture = display_image(images[1].numpy()).astype(np.float64)
    jet = plotly.colors.get_colorscale("Jet")
    for image, cam in zip(svg.iter(f"{SVG}image"), (out["other_target"]["cam"], out["cam"])):
        pixels = png_pixels(image.get("href")).astype(np.float64)
        rows = np.arange(picture.shape[0]) * cam.shape[0] // picture.shape[0]  # the cam cell over each pixel
        columns = np.arange(picture.shape[1]) * cam.shape[1] // picture.shape[1]
        heat = sampled_colours(jet, np.clip(np.asarray(cam)[rows[:, None], columns[None, :]], 0, 1))
        np.testing.assert_allclose(pixels, 0.55 * picture + 0.45 * heat, atol=1.01)
    assert not is_picture(attention_heads_figure(np.random.default_rng(0).random((2, 4, 4)), "attention"))


def _wrong_datapoint(backend, epoch) -> dict:
    return next(row for row in backend.table(epoch).page(limit=100) if row["label"] != row["prediction"])


def test_badges_and_grad_cam_titles_name_the_classes(run):
    backend, found = run
    epoch = backend.epochs(found)[-1]
    row = _wrong_datapoint(backend, epoch)
    shown = render_datapoint(backend, found.path, epoch.key, row["idx"])
    texts = _texts(shown)
    assert f"label {row['label_name']} ({row['label']})" in texts
    assert f"prediction {row['prediction_name']} ({row['prediction']})" in texts
    assert f"{row['label_name']} ({row['label']})" in texts  # the Labels section
    assert not any(text.startswith("predicted_class") for text in texts)  # the number is now a named badge
    cams = [svg for title, svg in _pictures(shown) if title.startswith("Grad-CAM")]  # drawn as a picture
    assert [text.text for text in cams[0].iter(f"{SVG}text")][:2] == [f"label: {row['label_name']}",
                                                                      f"prediction: {row['prediction_name']}"]


@pytest.mark.parametrize("component", [alert("text", color) for color in ("info", "warning", "danger", "secondary",
                                                                          "light")]
                         + [badge("text", color) for color in ("info", "warning", "danger", "success", "secondary",
                                                               "light")], ids=lambda component: component.color)
def test_every_alert_and_badge_colour_is_styled_by_the_bootstrap_the_viewer_serves(component):
    """Alerts and badges are dash-bootstrap-components; the viewer serves Bootstrap's stylesheet itself (offline): a
    colour without its rule there is drawn as bare text."""
    with open(f"{REPO_ROOT}/runners/eval_viewer/assets/bootstrap.min.css") as css:
        styled = set(re.findall(r"\.((?:alert|bg)-[a-z]+)\{", css.read()))
    assert f"{'alert' if type(component).__name__ == 'Alert' else 'bg'}-{component.color}" in styled


def test_compare_epochs_rows_align_channels_across_the_run_s_epochs(run):
    """Each column's picture shows the captured feature maps of the same channels on one colour scale, the
    difference column last minus first on a scale centred on 0: checked pixel by pixel against the captured
    arrays, coloured by plotly's own sampling of the scales."""
    backend, found = run
    epochs = [e for e in backend.epochs(found) if e.has_debug]
    assert len(epochs) >= 2
    panel = epoch_columns(backend, found, epochs, 3)
    assert f"{epochs[-1].label} − {epochs[0].label}" in _texts(panel)
    assert not _graphs(panel)  # maps are pictures: nothing for plotly to draw
    pictures = [svg for title, svg in _pictures(panel) if "feature map" in title or title.startswith("difference")]
    assert len(pictures) == len(epochs) + 2  # the feature maps' row and Grad-CAM's difference
    captured = [load_datapoint(backend, found, epoch, 3)["debug"]["features"] for epoch in epochs]
    captions = [[text.text for text in svg.iter(f"{SVG}text")][:MAX_PANELS] for svg in pictures[:len(epochs) + 1]]
    assert all(caption == captions[0] for caption in captions)  # the same channels, the difference too
    channels = [int(caption.split()[1]) for caption in captions[0]]
    expected = feature_map_colours([np.stack([out["feature_map"][list(out["channel_indices"]).index(c)]
                                              for c in channels]) for out in captured])
    for svg, colours in zip(pictures, expected):
        pixels = png_pixels(next(svg.iter(f"{SVG}image")).get("href"))
        assert (pixels[..., 3] == 255).sum() == colours[..., 0].size  # every map cell drawn, the gaps clear
        np.testing.assert_allclose(mosaic_maps(pixels), colours, atol=1)  # each map where its caption is


# ------------------------------------------------------------------ attention
@pytest.fixture(scope="module")
def attention(tmp_path_factory):
    """A real AttentionDebugger output of a vision transformer on a 4x4 patch grid, and its input image."""
    torch.manual_seed(0)
    model = AttentionClassifier(patch_size=4, dim=16, depth=2, num_heads=2).eval()
    images = torch.randn(2, 3, 16, 16)
    outputs = capture_epoch(model, images, tmp_path_factory.mktemp("att"), 2,
                            [entry("att", AttentionDebugger, layer_name="blocks.0.attn")])
    return outputs[1]["att"], images[1].numpy()


def test_attention_axes_are_labelled_by_query_and_key_index(attention):
    out, _ = attention
    heads, entropy = output_figures(out)
    assert heads.layout.xaxis.title.text == "key (token index)" and heads.layout.yaxis.title.text == \
        "query (token index)"
    keys = out["attention"].shape[-1]
    tiles = heads.layout.meta["tiles"]
    first_tile = [(v, t) for v, t in zip(heads.layout.xaxis.tickvals, heads.layout.xaxis.ticktext)
                  if tiles[0][1] <= v < tiles[0][1] + tiles[0][3]]
    assert [t for _, t in first_tile] == ["0", "4", "8", "12"] and first_tile[0][0] == tiles[0][1]
    assert len(heads.layout.xaxis.tickvals) == 4 * len(tiles)  # every head's tile labelled
    tokens = [f"t{i}" for i in range(keys)]
    (named, *_) = output_figures(out, DrawContext(tokens=tokens))
    assert list(named.layout.xaxis.ticktext[:keys]) == tokens and named.layout.xaxis.title.text == "key token"
    # in a narrow column the maps shrink to their domain from the top: tick labels right under them, no blank band
    assert heads.layout.yaxis.constrain == "domain" and heads.layout.yaxis.constraintoward == "top"


def test_uniform_entropy_is_a_line_at_log_of_the_number_of_keys(attention):
    out, _ = attention
    entropy = output_figures(out)[-1]
    np.testing.assert_allclose(traces(entropy, go.Bar)[0].y, out["entropy_per_head"])
    (line,) = entropy.layout.shapes
    assert line.y0 == line.y1 == pytest.approx(math.log(out["attention"].shape[-1]))
    assert entropy.layout.yaxis.range[1] > line.y0


def test_vision_attention_is_drawn_over_the_image_patches(attention):
    out, image = attention
    heads, overlay, _ = output_figures(out, DrawContext(image=image))
    assert len(traces(overlay, go.Image)) == 1
    expected = out["attention"].astype(np.float64).mean(axis=(0, 1)).reshape(out["grid"])  # what each patch gets
    np.testing.assert_allclose(traces(overlay, go.Heatmap)[0].z, expected)
    assert traces(overlay, go.Heatmap)[0].dx == image.shape[-1] / out["grid"][1]  # a cell per patch
    assert len(output_figures(out)) == 2  # no image: no overlay


def test_a_cls_token_s_attention_is_mapped_onto_the_patches_without_a_grid():
    rng = np.random.default_rng(0)
    weights = rng.random((3, 17, 17))
    weights /= weights.sum(-1, keepdims=True)
    heat, what = patch_attention(weights)
    np.testing.assert_allclose(heat, weights[:, 0, 1:].mean(axis=0).reshape(4, 4))
    assert "CLS" in what
    assert patch_attention(rng.random((2, 7, 7))) is None  # 7 keys: no square of patches


def test_a_position_encoding_is_drawn_once_folded_and_marked_as_shared(tmp_path):
    torch.manual_seed(0)
    model = AttentionClassifier(patch_size=4, dim=16, depth=1, num_heads=2).eval()
    outputs = capture_epoch(model, torch.randn(2, 3, 16, 16), tmp_path, 2, [entry("cap", CaptureDebugger)])
    out = outputs[1]["cap"]
    assert out["states"]["pos_embed"]["position_encoding"]["shared"]
    figures = output_figures(out)
    shared = [fig for fig in figures if is_shared(fig)]
    assert shared and all(fig.layout.title.text.startswith("pos_embed.position_encoding") for fig in shared)
    assert all(fig.layout.title.text.endswith(SHARED) for fig in shared)
    body = display_debug_outputs({"cap": out})
    folded = [node for node in _walk(body) if type(node).__name__ == "Details"]
    assert len(folded) == 1 and folded[0].className == "shared-outputs"
    inside = _figure_titles(folded[0].children)
    outside = [title for title in _figure_titles([body]) if title not in inside]
    assert inside == [fig.layout.title.text for fig in shared]
    assert outside and not any(title.startswith("pos_embed") for title in outside)



def test_a_shared_state_drawn_by_three_figures_is_named_once_in_its_fold():
    """the fold's summary said "position_encoding_sine, position_encoding_sine, position_encoding_sine"."""
    rng = np.random.default_rng(0)
    states = {"position_encoding_sine": {
        "position_embeddings_final": {"kind": "tensor", "data": rng.random((8, 4, 4)).astype(np.float32)},
        "frequency_dimensions": {"kind": "tensor", "data": rng.random(4).astype(np.float32)}}}
    body = display_debug_outputs({"cap": {"kind": "captured_states", "states": states}})
    folded = [node for node in _walk(body) if type(node).__name__ == "Details"]
    assert len(_figure_titles(folded[0].children)) == 3
    assert folded[0].children[0].children == f"{SHARED}: position_encoding_sine"


def test_compare_views_fold_and_mark_a_shared_state_with_its_numbers(tmp_path):
    columns, models = [], []
    for seed in (0, 1):  # two "epochs" of the same model
        torch.manual_seed(seed)
        models.append(AttentionClassifier(patch_size=4, dim=16, depth=1, num_heads=2).eval())
        out = capture_epoch(models[-1], torch.randn(2, 3, 16, 16), tmp_path / str(seed), 2,
                            [entry("cap", CaptureDebugger)])[1]["cap"]
        columns.append(CompareColumn(f"epoch {seed}", debug={"cap": out}))
    body = display_compare(columns)
    folded = [node for node in _walk(body) if type(node).__name__ == "Details"]
    assert len(folded) == 1 and folded[0].className == "shared-outputs"
    assert SHARED in folded[0].children[0].children and "pos_embed.position_encoding" in folded[0].children[0].children
    inside = _lazy_figures(folded[0].children)
    outside = [fig for fig in _lazy_figures(body) if fig.layout.title.text not in [f.layout.title.text for f in inside]]
    assert inside and all(is_shared(fig) for fig in inside)
    assert outside and not any(is_shared(fig) for fig in outside)
    heat = next(fig for fig in inside if isinstance(fig.data[0], go.Heatmap))
    expected = models[0].pos_embed.encoding((4, 4), torch.device("cpu"), torch.float32)[0].numpy()
    np.testing.assert_allclose(_decoded(heat.data[0].z), expected, atol=1e-6)

def _walk(component):
    yield component
    children = getattr(component, "children", None)
    for child in children if isinstance(children, (list, tuple)) else [children]:
        if hasattr(child, "to_plotly_json"):
            yield from _walk(child)


@pytest.mark.parametrize("value", [0.30019832432270050, np.float32(0.30019832), np.float64(0.30019832432270050)])
def test_meta_info_floats_are_printed_to_4_significant_digits(value):
    table = key_value_table({"contrast": value, "clutter": 3, "name": "ring"})
    cells = [row.children[1].children for row in table.children.children]
    assert cells == ["0.3002", "3", "ring"]


def test_the_score_chart_of_a_one_epoch_run_spans_its_value_not_minus_half_to_one(run, tmp_path):
    backend, found = run
    shutil.copytree(found.path, tmp_path / "logs" / "one_epoch")
    shutil.rmtree(tmp_path / "logs" / "one_epoch" / "epoch_1")
    one = ViewerBackend([str(tmp_path / "logs")])
    single = one.run(str(tmp_path / "logs" / "one_epoch"))
    (epoch,) = one.epochs(single)
    chart = history_data(one, single, "cross_entropy", epoch.key)
    (value,) = chart["y"]
    low, high = chart["range"]
    assert low < value < high and high - low < 0.2 * abs(value) + 0.05
