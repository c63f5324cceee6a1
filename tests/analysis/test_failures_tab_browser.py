"""The Failures tab in a real headless Chromium: click a slice, the table narrows to it, open one of its
datapoints and see its Debug Outputs."""

from __future__ import annotations

import os
import re

import pytest

from analysis.failures import analyze
from runners.eval_viewer.layout import failures as failures_layout
from runners.eval_viewer.layout import ids
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, WAIT_MS, browser_or_skip, serve_viewer
from tests.e2e.viewer_page import open_row, wait_caption

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]


def test_click_a_slice_then_open_one_of_its_datapoints(planted_run):
    browser_or_skip()
    from playwright.sync_api import sync_playwright

    findings = analyze(planted_run["work_dir"])
    first = findings.slices[0]
    errors = []
    with serve_viewer([os.path.dirname(planted_run["work_dir"])]) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.set_default_timeout(4 * WAIT_MS)  # the tab analyses the epoch on first show: slow on a busy machine
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(url)
        total = findings.datapoints
        wait_caption(page, f"{total} datapoints")

        page.click(f"#{failures_layout.TAB_FAILURES}")  # click 1: the tab
        button = page.locator(f"button:has-text('{first.description}')").first
        button.click()  # click 2: the slice
        page.wait_for_selector(f"#{failures_layout.FILTER_NOTE}:has-text('{first.size} datapoints')")
        assert f"{first.size} of {total} datapoints match" in wait_caption(page, f"{first.size} of {total}")

        idx = int(open_row(page, 0))  # click 3: a datapoint of the slice
        assert idx in first.idx
        page.wait_for_selector(f"#{ids.DATAPOINT_PANEL} .datapoint-title:has-text('{idx}')")
        panel = page.locator(f"#{ids.DATAPOINT_PANEL}").inner_text()
        assert "Debug Outputs" in panel and "layer3_energy" in panel
        assert re.search(rf"\b{idx}\b", panel)
        browser.close()
    assert not errors, f"the page logged errors: {errors}"
