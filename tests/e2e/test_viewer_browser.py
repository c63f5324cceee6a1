"""The eval viewer in real headless Chromium over a real trained run: pick an epoch, open the worst
datapoint, see its four sections with drawn debug outputs, compare epochs, and fall back to three sections."""

from __future__ import annotations

import pytest

from runners.config_file import load_config
from runners.eval_viewer.compare_epochs.ids import COMPARE_EPOCHS_PANEL, TAB_COMPARE_EPOCHS
from runners.eval_viewer.controls.ids import EPOCH_BADGES, EPOCH_SELECT, NEAREST_DEBUG_EPOCH
from runners.eval_viewer.datapoint.ids import DATAPOINT_PANEL, TAB_DATAPOINT
from runners.trainers import BaseTrainer
from tests.e2e.conftest import DEBUGGER, serve_viewer
from tests.e2e.viewer_page import column, debug_figures, grid_cell, open_row, pick, wait_caption, wait_title
from tests.runs import write_config

ALL_SECTIONS = ["Inputs", "Labels", "Meta info", "Debug Outputs"]

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def viewer_url(tmp_path_factory):
    """A trained run (debug outputs at epochs 1 and 2, none at epoch 0), and the viewer over it."""
    root = tmp_path_factory.mktemp("e2e")
    (root / "configs").mkdir()
    config_path = write_config(root / "configs" / "run.py", root / "logs" / "run", epochs=3, checkpoint_method=2,
                               extra=DEBUGGER)
    BaseTrainer(load_config(config_path)).run()
    with serve_viewer([str(root / "logs")]) as url:
        yield url


def _headings(page, panel: str) -> list[str]:
    return [h.inner_text() for h in page.query_selector_all(f"#{panel} .datapoint h4")]


def test_open_the_worst_datapoint_compare_epochs_and_an_epoch_without_debug_outputs(viewer_url, new_page):
    page = new_page(viewer_url)
    wait_caption(page, "epoch 2: ")  # the latest epoch with debug outputs
    pick(page, EPOCH_SELECT, "epoch 1 · debug")
    wait_caption(page, "epoch 1: ")

    idx = open_row(page, 0)
    wait_title(page, DATAPOINT_PANEL, f"datapoint {idx} · logs/run · epoch 1")
    drawn = debug_figures(page)
    drawn.first.wait_for()
    assert _headings(page, DATAPOINT_PANEL) == ALL_SECTIONS
    assert page.locator(f"#{DATAPOINT_PANEL} .debugger-block .card-header").all_inner_texts() == [
        "layer3_energy", "gradcam"]
    assert drawn.count() >= 2

    page.click(f"#{TAB_COMPARE_EPOCHS}")
    columns = page.locator(f"#{COMPARE_EPOCHS_PANEL} .compare-column")
    page.wait_for_selector(f"#{COMPARE_EPOCHS_PANEL} .compare-column >> nth=1")
    assert [t.splitlines()[0] for t in columns.all_inner_texts()] == ["epoch 1", "epoch 2"]
    first_row = page.locator(f"#{COMPARE_EPOCHS_PANEL} .compare-figure-row").first
    first_row.locator(":is(img.picture, .js-plotly-plot)").nth(1).wait_for()

    page.click(f"#{TAB_DATAPOINT}")
    pick(page, EPOCH_SELECT, "epoch 0")
    wait_title(page, DATAPOINT_PANEL, "epoch 0")
    assert _headings(page, DATAPOINT_PANEL) == ALL_SECTIONS[:3]
    assert page.locator(f"#{EPOCH_BADGES} .badge").inner_text() == "no debug outputs"
    assert page.locator(f"#{NEAREST_DEBUG_EPOCH}").inner_text() == "→ epoch 1 has debug outputs"

    other = 1 if idx == "0" else 0
    _click_grid_cell(page, other)
    wait_title(page, DATAPOINT_PANEL, f"datapoint {other} ")
    assert column(page, "idx")  # the table still shows the epoch's rows


def _click_grid_cell(page, idx: int) -> None:
    """The score grid holds the 24 datapoints in 5 x 5 cells in idx order, idx 0 at the top left."""
    row, col = divmod(idx, 5)
    page.mouse.click(*grid_cell(page, col, row))
