"""The mask figures in the viewer, in a real headless Chromium over a real two-epoch run of the promptable
segmentation example (debug outputs kept at its last epoch, as the example keeps them): the overlay drawn by the
viewer's own plotly bundle, its view buttons and opacity slider working, the prompt's attention over the image per
head and layer, a broken datapoint's error in its place, and the run opened in its own failure order."""

from __future__ import annotations

import copy
import os
from urllib.parse import urlencode

import pytest

from analysis.epoch_table import EpochTable
from runners.config_file import load_config
from runners.eval_viewer.compare_epochs.ids import COMPARE_EPOCHS_NOTE, COMPARE_EPOCHS_PANEL, TAB_COMPARE_EPOCHS
from runners.eval_viewer.controls.ids import METRIC_SELECT
from runners.trainers import BaseTrainer
from tests.configs.test_segmentation_examples import ScenesWithBrokenOnes
from tests.e2e.viewer_page import column, open_row, wait_caption, wait_title
from tests.runs import REPO_ROOT, one_thread

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

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

    idx = open_row(page, 0)
    page.click(f"#{TAB_COMPARE_EPOCHS}")
    wait_title(page, COMPARE_EPOCHS_PANEL, f"datapoint {idx} ")
    assert page.locator(f"#{COMPARE_EPOCHS_NOTE}").inner_text().startswith("Only epoch 1 kept debug outputs")
    panel = page.locator(f"#{COMPARE_EPOCHS_PANEL}")
    assert panel.locator(".compare-headings h5").all_inner_texts() == ["epoch 0", "epoch 1", "difference"]
    assert "epoch 0 has no debug outputs: only its scores are shown" in panel.inner_text()
