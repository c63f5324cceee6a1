"""The mask figures in the viewer, in a real headless Chromium over a real two-epoch run of the promptable
segmentation example (debug outputs kept at its last epoch, as the example keeps them): the overlay drawn by the
viewer's own plotly bundle, its view buttons and opacity slider working, the prompt's attention over the image per
head and layer, a broken datapoint's error in its place, the run opened in its own failure order, and the prompt
drawn as a point in the inputs and on the gallery's tiles, with the masks' errors."""

from __future__ import annotations

import copy
import io
import os
from urllib.parse import urlencode

import numpy as np
import PIL.Image
import pytest

from analysis.epoch_table import EpochTable
from debuggers.pages.reader import DebugOutputs
from runners.config_file import load_config
from runners.eval_viewer.compare_epochs.ids import COMPARE_EPOCHS_NOTE, COMPARE_EPOCHS_PANEL, TAB_COMPARE_EPOCHS
from runners.eval_viewer.controls.ids import METRIC_SELECT
from runners.eval_viewer.datapoint.ids import DATAPOINT_PANEL
from runners.eval_viewer.export.report import export_report
from runners.eval_viewer.figures.marks import FALSE_NEGATIVE, FALSE_POSITIVE, MARK_PX, RING
from runners.eval_viewer.gallery.ids import GALLERY_CAPTION, GALLERY_TILES, TAB_GALLERY
from runners.eval_viewer.table.ids import TABLE
from runners.trainers import BaseTrainer
from tests.configs.test_segmentation_examples import ScenesWithBrokenOnes
from tests.e2e.conftest import expect
from tests.e2e.viewer_page import CUT_TEXT, FITS_LONGEST_NUMBER, column, open_row, wait_caption, wait_title
from tests.runs import REPO_ROOT, one_thread

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

# Each drawn graph's boxes in the page: its own, its title's, its captions' (annotations), its colour bars' (with
# their labels), its heatmap's image, and the rows of its heatmap and of each map in it (layout.meta.tiles: [top,
# left, rows, columns])
BOXES = """block => [...block.querySelectorAll('.js-plotly-plot')].map(g => {
    const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    const heat = g.querySelector('.hm image'), trace = g.data.find(t => t.type === 'heatmap');
    const z = trace ? trace.z : [];  // an array of rows, or plotly's typed-array spec {dtype, bdata, shape}
    return {title: g.layout.title.text, graph: box(g), titleBox: box(g.querySelector('.gtitle')),
            captions: [...g.querySelectorAll('.annotation')].map(a => [a.textContent, box(a)]),
            bars: [...g.querySelectorAll('.colorbar')].map(box),
            heat: heat ? box(heat) : null,
            rows: z.length !== undefined ? z.length : Number(String(z.shape).split(',')[0]),
            tiles: ((g.layout.meta || {}).tiles || []).map(t => t[2])};
})"""
MIN_MAP_PX = 40  # the least height a map of attention is drawn at: a 3x64 map at 3 px is a sliver no one reads
VISIBLE = "g => Object.fromEntries(g.data.map(t => [t.name, t.visible]))"  # each trace's visibility, as set
OPACITY = "g => g.data.filter(t => t.type === 'heatmap').map(t => t.opacity)"


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("masks") / "logs"
    config = copy.deepcopy(load_config(os.path.join(REPO_ROOT, "configs", "examples",
                                                    "promptable_segmentation_trainer.py")))
    config.update(work_dir=str(root / "run"), epochs=2)
    config["scheduler"]["args"]["T_max"] = 2
    config["train_dataset"]["args"]["num_datapoints"] = 16
    config["val_dataset"] = {"class": ScenesWithBrokenOnes, "args": {**config["val_dataset"]["args"],
                                                                     "num_datapoints": 8}}
    with one_thread():
        BaseTrainer(config).run()
    return root


def _url(base: str, run, idx: int) -> str:
    return f"{base}?{urlencode({'run': str(run), 'epoch': 'epoch_1', 'idx': idx})}"


def _block(page, name: str):
    return page.locator(".debugger-block", has=page.locator(".card-header", has_text=name)).first


def test_the_mask_overlay_its_buttons_and_its_slider(viewer_url, logs, new_page):
    page = new_page(_url(viewer_url, logs / "run", 4))
    overlay = _block(page, "masks").locator(".lazy-graph").first
    overlay.scroll_into_view_if_needed()  # a graph is drawn once in view
    graph = overlay.element_handle()
    page.wait_for_function("g => g.classList.contains('js-plotly-plot') && Array.isArray(g.data)", arg=graph)
    shown = overlay.evaluate(VISIBLE)
    assert shown["false positive"] is True and shown["false negative"] is True
    assert shown["label mask"] == "legendonly" and shown["input"] in (None, True) and shown["prompt point"] is True
    overlay.locator(".updatemenu-button", has_text="label and prediction").click()
    page.wait_for_function("g => g.data.find(t => t.name === 'label mask').visible === true", arg=graph)
    shown = overlay.evaluate(VISIBLE)
    assert shown["predicted mask"] is True and shown["false positive"] == "legendonly"
    assert set(overlay.evaluate(OPACITY)) == {0.5}
    overlay.locator(".slider-group .slider-rail-touch-rect").click(position={"x": 2, "y": 5})  # the far left: 0.1
    page.wait_for_function("g => g.data.filter(t => t.type === 'heatmap').every(t => t.opacity === 0.1)", arg=graph)


def test_the_prompt_attention_per_head_and_layer_and_a_broken_datapoint(viewer_url, logs, new_page):
    page = new_page(_url(viewer_url, logs / "run", 4))
    states = _block(page, "sam2_states")
    figure = "[data-figure*='cross-attention, per head']"
    states.locator(f".lazy-graph{figure}").scroll_into_view_if_needed()  # a graph is drawn once in view
    attention = states.locator(f".js-plotly-plot{figure}")
    attention.wait_for()
    labels = [text.strip() for text in attention.locator(".annotation-text").all_text_contents()]
    assert {"head 0", "head 3", "layer 0", "layer 1", "final"} <= set(labels), labels
    page.goto(_url(page.url.split("?")[0], logs / "run", 2))
    error = _block(page, "masks").locator(".debugger-error")
    error.wait_for()
    assert "outside the 32x32 image" in error.inner_text()


def test_the_run_opens_in_its_failure_order_and_compare_epochs_says_which_epochs_kept_outputs(viewer_url, logs,
                                                                                              new_page):
    """it opened sorted by iou_prediction_error, highest first, not by the IoU its failure_definition names, lowest
    first; Compare epochs had one column and did not say that the other epochs kept no outputs."""
    page = new_page(viewer_url)
    assert "sorted by iou (lowest first)" in wait_caption(page, "epoch 1: 8 datapoints")
    assert page.locator(f"#{METRIC_SELECT}").inner_text().strip() == "iou"
    values = EpochTable(str(logs / "run" / "epoch_1" / "epoch_table.parquet")).values(["idx", "iou"])
    scored = sorted((iou, idx) for idx, iou in zip(values["idx"], values["iou"]) if iou == iou)
    assert scored and column(page, "idx")[:len(scored)] == [str(idx) for _, idx in scored]
    iou_cells = f"#{TABLE} .ag-center-cols-container .ag-cell[col-id='iou']"  # was cut to "0.00…"
    assert page.locator(iou_cells).count() >= len(scored) and page.evaluate(CUT_TEXT, iou_cells) == []
    assert page.evaluate(FITS_LONGEST_NUMBER, iou_cells)

    idx = open_row(page, 0)
    page.click(f"#{TAB_COMPARE_EPOCHS}")
    wait_title(page, COMPARE_EPOCHS_PANEL, f"datapoint {idx} ")
    assert page.locator(f"#{COMPARE_EPOCHS_NOTE}").inner_text().startswith("Only epoch 1 kept debug outputs")
    panel = page.locator(f"#{COMPARE_EPOCHS_PANEL}")
    assert panel.locator(".compare-headings h5").all_inner_texts() == ["epoch 0", "epoch 1", "difference"]
    assert "epoch 0 has no debug outputs: only its scores are shown" in panel.inner_text()


def test_the_prompt_is_a_point_in_the_inputs_and_the_gallery_draws_it_with_the_errors(viewer_url, logs, new_page):
    """inputs showed the prompt as "point: array (2,) float32: min 12.5, max 12.5, mean 12.5", not drawn on the
    image; gallery tiles had no prompt and no false positives or negatives to show, and cut the score off."""
    captured = DebugOutputs(str(logs / "run" / "datapoints"))[4]["inputs"]
    x, y = (float(v) for v in np.asarray(captured["point"]).reshape(2))
    page = new_page(_url(viewer_url, logs / "run", 4))
    wait_title(page, DATAPOINT_PANEL, "datapoint 4 ")
    inputs = page.locator(f"#{DATAPOINT_PANEL} .section-inputs")
    assert inputs.locator(".prompt-points").inner_text() == f"point: (x, y) ({x:.4g}, {y:.4g}), marked ○ on image"
    mark = inputs.locator(".marked-image .point-mark")
    picture, ring = inputs.locator(".marked-image img").bounding_box(), mark.bounding_box()
    side = np.asarray(captured["image"]).shape[-1]
    assert abs(ring["x"] + ring["width"] / 2 - (picture["x"] + x / side * picture["width"])) < 1.5
    assert abs(ring["y"] + ring["height"] / 2 - (picture["y"] + y / side * picture["height"])) < 1.5

    page.click(f"#{TAB_GALLERY}")
    expect(page.locator(f"#{GALLERY_CAPTION}")).to_contain_text(
        "masks › errors drawn over each input (false positives red, false negatives amber)")
    tile = page.locator(f"#{GALLERY_TILES} .gallery-tile[data-idx='4']")
    score = tile.locator(".gallery-score")
    assert score.evaluate("s => s.scrollWidth <= s.clientWidth") and score.inner_text().startswith("iou ")
    source = tile.locator("img").get_attribute("data-src")
    assert "overlay=masks" in source
    drawn = np.asarray(PIL.Image.open(io.BytesIO(page.request.get(viewer_url + source).body())).convert("RGB"))
    factor = drawn.shape[0] / side
    assert drawn.shape[0] >= MARK_PX
    at = (round(y * factor), round(x * factor + RING * drawn.shape[0]))
    assert tuple(drawn[at]) == (255, 255, 255), "the prompt is not ringed on the tile"
    output = DebugOutputs(str(logs / "run" / "epoch_1" / "debugger"))[4]["masks"]
    wrong = (output["label_mask"] != output["predicted_mask"]).any()
    colours = {tuple(pixel) for pixel in drawn.reshape(-1, 3)}
    assert not wrong or {FALSE_POSITIVE, FALSE_NEGATIVE} & colours, "the errors are not drawn"

def _overlap(a, b) -> bool:
    """Whether two boxes [left, top, right, bottom] share more than a pixel each way."""
    return min(a[2], b[2]) - max(a[0], b[0]) > 1 and min(a[3], b[3]) - max(a[1], b[1]) > 1


@pytest.mark.parametrize("width", [1500, 1920])
def test_the_attention_figures_are_readable_at_the_widths_people_use(viewer_url, logs, new_page, width):
    """Attention across layers (self- and cross-attention apart) and the prompt_attention debugger's heads: no
    caption or title over another, none (nor a colour bar) cut off at the graph's edge, and every map at least
    ``MIN_MAP_PX`` high."""
    page = new_page(_url(viewer_url, logs / "run", 4), width=width)
    graphs = {}
    for name in ("attention across layers", "prompt_attention"):
        block = _block(page, name)
        block.locator(".lazy-graph").first.wait_for()
        for lazy in block.locator(".lazy-graph").all():
            lazy.scroll_into_view_if_needed()  # a graph is drawn once in view
            page.wait_for_function("g => g.classList.contains('js-plotly-plot') && g.querySelector('.gtitle')",
                                   arg=lazy.element_handle())
        graphs[name] = block.evaluate(BOXES)
    for graph in graphs["attention across layers"] + graphs["prompt_attention"][:1]:
        boxes = [("title", graph["titleBox"])] + graph["captions"]
        for i, (text, box) in enumerate(boxes):
            assert box[0] >= graph["graph"][0] - 1 and box[2] <= graph["graph"][2] + 1, (graph["title"], text)
            for other, second in boxes[i + 1:]:
                assert not _overlap(box, second), (graph["title"], text, other)
        for bar in graph["bars"]:  # its tick labels and title too, in a wide window as in a narrow one
            assert bar[2] <= graph["graph"][2] + 1, (graph["title"], bar, graph["graph"])
        assert graph["tiles"] and graph["rows"], graph["title"]
        drawn = graph["heat"][3] - graph["heat"][1]
        assert min(drawn * rows / graph["rows"] for rows in graph["tiles"]) >= MIN_MAP_PX, (graph["title"], drawn)
    across = [graph["title"] for graph in graphs["attention across layers"]]
    assert len(across) == 3 and sum(title.startswith("self-attention") for title in across) == 1, across


@pytest.mark.slow
def test_the_export_draws_the_epochs_calibration_once_with_its_datapoints_starred(logs, tmp_path):
    out = export_report(str(logs / "run"), [0, 4], str(tmp_path / "report.html"))  # the others: broken on purpose
    with open(out, encoding="utf-8") as f:
        page = f.read()
    assert page.count("masks over the input") == 2
    assert page.count("IoU calibration over the epoch") == 1  # not once per datapoint
    assert page.count("this report's datapoints") == 1
