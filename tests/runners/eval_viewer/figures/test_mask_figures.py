"""The mask and SAM2 figures: what each layer holds against NumPy, the controls, calibration, and the figures drawn
from captured states (a page's, and the guide's batched ``debug_states``)."""

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from data.datasets.prompted_masks import collate_prompted_masks
from data.datasets.prompted_shapes import PromptedShapesDataset
from data.viewer.debug_utils import clear_debug_states, disable_debug_mode, enable_debug_mode, get_debug_states
from debuggers.capture_debugger import CaptureDebugger
from debuggers.mask_debugger import MaskDebugger
from models.promptable_segmenter import PromptableSegmenter
from runners.eval_viewer.export.debug_states import visualize_debug_states
from runners.eval_viewer.figures.context import DrawContext
from runners.eval_viewer.figures.masks import VIEWS, calibration_curve, calibration_figure, error_layers, mask_figures
from runners.eval_viewer.figures.registry import output_figures
from runners.eval_viewer.figures.sam2 import states_table
from tests.debuggers.library import entry, run_batches


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    torch.manual_seed(0)
    model = PromptableSegmenter(num_masks=2).eval()
    dataset = PromptedShapesDataset(3, split="val")
    batch = collate_prompted_masks([dataset[i] for i in range(3)])
    debuggers = [entry("masks", MaskDebugger, iou_key="iou_predictions"), entry("states", CaptureDebugger)]
    _, outputs = run_batches(model, [batch], tmp_path_factory.mktemp("captured"), debuggers, strict=True)
    return outputs, batch, model


def test_error_layers_against_numpy():
    rng = np.random.default_rng(0)
    label, predicted = rng.integers(0, 3, (6, 6)).astype(np.uint8), rng.integers(0, 3, (6, 6)).astype(np.uint8)
    label[0] = 255
    layers = error_layers(label, predicted)
    counted = label != 255
    np.testing.assert_array_equal(layers["false positive"], (predicted > 0) & (label == 0))
    np.testing.assert_array_equal(layers["false negative"], (label > 0) & counted & (predicted == 0))
    np.testing.assert_array_equal(layers["wrong class"], (label > 0) & counted & (predicted > 0) & (label != predicted))
    assert not any(layer[0].any() for layer in layers.values())  # ignored pixels are in no layer


def test_the_overlay_draws_each_layer_over_the_input_with_its_controls(captured):
    outputs, batch, _ = captured
    output = outputs[1]["masks"]
    calibration = {"iou": {"true": np.array([0.2, 0.9, 0.5]), "predicted": np.array([0.3, 0.8, 0.5]),
                           "idx": np.array([0, 1, 2])}}
    overlay, iou, calibration = mask_figures(output, DrawContext(image=batch["inputs"]["image"][1].numpy(),
                                                                 calibration=calibration))
    traces = {trace.name: trace for trace in overlay.data}
    assert isinstance(traces["input"], go.Image)
    label, predicted = output["label_mask"][0] > 0, output["predicted_mask"][0] > 0
    np.testing.assert_array_equal(np.isfinite(np.asarray(traces["false negative"].z, dtype=float)), label & ~predicted)
    np.testing.assert_array_equal(np.isfinite(np.asarray(traces["false positive"].z, dtype=float)), predicted & ~label)
    np.testing.assert_array_equal(np.isfinite(np.asarray(traces["label mask"].z, dtype=float)), label)
    point = traces["prompt point"]
    assert (point.x[0] + 0.5, point.y[0] + 0.5) == tuple(output["point"][0])
    assert traces["false positive"].visible is True and traces["label mask"].visible == "legendonly"
    buttons = {button.label: button for button in overlay.layout.updatemenus[0].buttons}
    assert set(buttons) == set(VIEWS)
    shown = dict(zip([trace.name for trace in overlay.data], buttons["label"].args[0]["visible"]))
    assert shown["label mask"] is True and shown["predicted mask"] == "legendonly" and shown["input"] is True
    slider = overlay.layout.sliders[0]
    overlays = [i for i, trace in enumerate(overlay.data) if isinstance(trace, go.Heatmap)]
    assert slider.steps[-1].args == ({"opacity": 1.0}, tuple(overlays))  # the opacity of every mask layer
    assert [bar.name for bar in iou.data] == ["IoU (true)", "IoU predicted by the model"]
    assert iou.data[1].y[0] == pytest.approx(output["predicted_iou"])
    star = calibration.data[-1]
    assert star.name == "this datapoint" and (star.x[0], star.y[0]) == pytest.approx(
        (output["predicted_iou"], output["iou"]))


def test_calibration_curve_is_the_mean_true_iou_per_bin():
    centres, means = calibration_curve(np.array([0.1, 0.3, 0.9, 0.7]), np.array([0.05, 0.08, 0.95, 0.91]))
    np.testing.assert_allclose(centres, [0.05, 0.95])
    np.testing.assert_allclose(means, [0.2, 0.8])
    figure = calibration_figure(np.array([0.1, np.nan]), np.array([0.2, 0.3]))
    assert len(figure.data[0].x) == 1  # a datapoint without a score is left out


def test_an_exports_calibration_stars_its_datapoints_that_have_scores():
    true, predicted = np.array([0.1, 0.9, np.nan, 0.4]), np.array([0.2, 0.8, 0.5, 0.6])
    figure = calibration_figure(true, predicted, np.array([10, 11, 12, 13]), chosen=[13, 12, 10, 99])
    stars = figure.data[-1]
    assert stars.name == "this report's datapoints"
    assert sorted(zip(stars.customdata, stars.x, stars.y)) == [(10, 0.2, 0.1), (13, 0.6, 0.4)]  # 12: no true IoU


def test_sam2_figures_from_a_page_and_from_the_guides_batched_states(captured):
    outputs, batch, model = captured
    image = batch["inputs"]["image"][0].numpy()
    figures = output_figures(outputs[0]["states"], DrawContext(image=image))
    titles = [str(figure.layout.title.text) for figure in figures]
    assert any(title.startswith("prompt token to image cross-attention") for title in titles)
    attention = figures[titles.index(next(t for t in titles if t.startswith("prompt token")))]
    heat = next(trace for trace in attention.data if isinstance(trace, go.Heatmap))
    states = outputs[0]["states"]["states"]
    weights = states["two_way_transformer_layer_0"]["attention_weights"]["data"]
    np.testing.assert_allclose(np.asarray(heat.z)[:8, 9:17], weights[1, 3].reshape(8, 8))  # layer 0, head 1, prompt
    assert np.asarray(heat.z).shape == (3 * 9 - 1, 4 * 9 - 1)  # 3 layers (2 and the final) by 4 heads
    assert any("individual" in title or "dimensions over" in title for title in titles)
    assert any(figure.layout.meta and figure.layout.meta.get("shared") for figure in figures)
    assert any("hypernetwork outputs" in title for title in titles)
    assert any("raw_masks_output" in title for title in titles)
    table = states_table(states)
    assert len(table.data[0].cells.values[0]) == sum(len(s) for s in states.values())
    # the guide's debug_states (batched tensors, {'data', 'metadata'}): datapoint 0 draws as the page's does
    enable_debug_mode()
    try:
        with torch.no_grad():
            model(batch["inputs"])
        drawn = visualize_debug_states(get_debug_states(), image=image, datapoint=0)
    finally:
        disable_debug_mode()
        clear_debug_states()
    drawn_titles = [str(f.layout.title.text).removeprefix("debug states: ") for f in drawn]
    assert set(titles) <= set(drawn_titles), (titles, drawn_titles)


def test_states_table_flags_nan_and_constant_states():
    table = states_table({"c": {"bad": {"data": np.array([1.0, np.nan])}, "flat": {"data": np.ones(4)}}})
    notes = dict(zip(table.data[0].cells.values[0], table.data[0].cells.values[1]))
    assert "NaN" in notes["c.bad"] and "no variance" in notes["c.flat"]


def test_the_prompt_is_drawn_where_it_lies_when_the_masks_are_strided():
    """A label larger than ``max_side`` is kept strided (every 4th pixel here): the prompt, given in the image's
    pixels, is drawn on the strided panel's pixel that holds it, not at its unstrided coordinates."""
    torch.manual_seed(0)
    model = PromptableSegmenter().eval()
    batch = collate_prompted_masks([PromptedShapesDataset(2, split="val")[i] for i in range(2)])
    with torch.no_grad():
        outputs = model(batch["inputs"])
    output = MaskDebugger(max_side=8)({**batch, "outputs": outputs}, model)
    assert output["label_mask"].shape[-2:] == (8, 8)
    star = next(trace for trace in output_figures({key: value[0] if isinstance(value, torch.Tensor) else value
                                                   for key, value in output.items()})[0].data
                if trace.name == "prompt point")
    x, y = batch["inputs"]["point"][0].tolist()
    assert (round(star.x[0]), round(star.y[0])) == (int(x) // 4, int(y) // 4)
