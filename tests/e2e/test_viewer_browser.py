"""The eval viewer in real headless Chromium over a real trained run: pick an epoch, open the worst
datapoint, see its four sections with drawn debug outputs, compare epochs, and fall back to three sections."""

from __future__ import annotations

import importlib.util
import os
import threading

import pytest
from werkzeug.serving import make_server

from runners.eval_viewer.app import create_app
from runners.eval_viewer.layout import ids
from runners.trainers import BaseTrainer
from tests.runs import REPO_ROOT, write_config
from utils.config_file import load_config

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOT = os.path.join(REPO_ROOT, "docs", "images", "viewer_datapoint.png")
WAIT_MS = 30_000
ALL_SECTIONS = ["Inputs", "Labels", "Meta info", "Debug Outputs"]

# A tiny copy of configs/examples/custom_debugger_trainer.py, plus Grad-CAM (drawn over the input image);
# debug outputs at epochs 1 and 2, none at epoch 0.
DEBUGGER = """
from configs.examples.custom_debugger_trainer import ChannelEnergyDebugger
from debuggers.gradcam_debugger import GradCAMDebugger
config["debugger"] = {"class": SequentialDebugger, "args": {"page_size_mb": 4, "debuggers_config": [
    {"name": "layer3_energy",
     "debugger_config": {"class": ChannelEnergyDebugger, "args": {"layer_name": "backbone.layer3"}}},
    {"name": "gradcam", "debugger_config": {"class": GradCAMDebugger, "args": {"target_layer": "backbone.layer4"}}}]}}
"""

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def _browser_or_skip() -> None:
    """Skip where no browser can run, with the reason; on CI (CI=true) that is a failure instead."""
    missing = [] if os.path.exists(CHROMIUM) else [f"{CHROMIUM} (install Debian's chromium package)"]
    if importlib.util.find_spec("playwright") is None:
        missing.append("the playwright Python package (pip install playwright; no browser download needed)")
    if not missing:
        return
    reason = f"the browser test needs {' and '.join(missing)}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}, which CI must provide")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def viewer_url(tmp_path_factory):
    """A trained run, and the viewer over it served on 127.0.0.1 at a free port."""
    _browser_or_skip()
    root = tmp_path_factory.mktemp("e2e")
    (root / "configs").mkdir()
    config_path = write_config(root / "configs" / "run.py", root / "logs" / "run", epochs=3, checkpoint_method=2,
                               extra=DEBUGGER)
    BaseTrainer(load_config(config_path)).run()
    server = make_server("127.0.0.1", 0, create_app([str(root / "logs")]).server, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def page(viewer_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.set_default_timeout(WAIT_MS)
        page.goto(viewer_url)
        yield page
        browser.close()


def _pick_epoch(page, label: str) -> None:
    """Choose an epoch and wait until the table shows it (its caption names the epoch)."""
    page.click(f"#{ids.EPOCH_SELECT}")
    page.get_by_role("option", name=label, exact=True).click()
    epoch = label.split(" · ")[0]
    page.wait_for_selector(f"#{ids.TABLE_CAPTION}:has-text('{epoch}: ')")


def _open_worst_datapoint(page) -> str:
    """Click the first row of the worst-first table; return its idx."""
    assert page.locator(f"#{ids.TABLE} td[data-dash-column='rank']").first.inner_text().strip() == "1"
    cell = page.locator(f"#{ids.TABLE} td[data-dash-column='idx']").first
    idx = cell.inner_text().strip()
    cell.click()
    return idx


def _headings(page, panel: str) -> list[str]:
    return [h.inner_text() for h in page.query_selector_all(f"#{panel} .datapoint h4")]


def test_open_the_worst_datapoint_compare_epochs_and_an_epoch_without_debug_outputs(page):
    page.wait_for_selector(f"#{ids.TABLE_CAPTION}:has-text('epoch 2: ')")  # the latest epoch with debug outputs
    _pick_epoch(page, "epoch 1 · debug")

    idx = _open_worst_datapoint(page)
    page.wait_for_selector(f"#{ids.DATAPOINT_PANEL} .datapoint-title:has-text('datapoint {idx} · logs/run · epoch 1')")
    debug_graphs = page.locator(f"#{ids.DATAPOINT_PANEL} .section-debug-outputs .js-plotly-plot")
    debug_graphs.first.wait_for()
    assert _headings(page, ids.DATAPOINT_PANEL) == ALL_SECTIONS
    assert page.locator(f"#{ids.DATAPOINT_PANEL} .debugger-block .card-header").all_inner_texts() == [
        "layer3_energy", "gradcam"]
    assert debug_graphs.count() >= 2
    os.makedirs(os.path.dirname(SCREENSHOT), exist_ok=True)
    page.locator(f"#{ids.DATAPOINT_PANEL}").screenshot(path=SCREENSHOT)

    page.click(f"#{ids.TAB_COMPARE_EPOCHS}")
    columns = page.locator(f"#{ids.COMPARE_EPOCHS_PANEL} .compare-column")
    page.wait_for_selector(f"#{ids.COMPARE_EPOCHS_PANEL} .compare-column >> nth=1")
    assert [t.splitlines()[0] for t in columns.all_inner_texts()] == ["epoch 1", "epoch 2"]
    page.locator(f"#{ids.COMPARE_EPOCHS_PANEL} .compare-column >> nth=1 >> .js-plotly-plot").first.wait_for()

    page.click(f"#{ids.TAB_DATAPOINT}")
    _pick_epoch(page, "epoch 0")
    page.wait_for_selector(f"#{ids.DATAPOINT_PANEL} .datapoint-title:has-text('epoch 0')")
    assert _headings(page, ids.DATAPOINT_PANEL) == ALL_SECTIONS[:3]
    assert page.locator(f"#{ids.EPOCH_BADGES}").inner_text() == "no debug outputs"

    other = 1 if idx == "0" else 0
    _click_grid_cell(page, other)
    page.wait_for_selector(f"#{ids.DATAPOINT_PANEL} .datapoint-title:has-text('datapoint {other} ')")


def _click_grid_cell(page, idx: int) -> None:
    """The score grid holds the 24 datapoints in 5 x 5 cells in idx order, idx 0 at the top left."""
    box = page.locator(f"#{ids.SCORE_GRID} .nsewdrag").first.bounding_box()
    row, col = divmod(idx, 5)
    page.mouse.click(box["x"] + box["width"] * (2 * col + 1) / 10, box["y"] + box["height"] * (2 * row + 1) / 10)
