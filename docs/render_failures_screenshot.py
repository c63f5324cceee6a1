"""Render docs/images/failures_tab.png: the viewer's Failures tab on a real planted-failures run.

    python main.py --config-filepath configs/examples/planted_failures_trainer.py
    python docs/render_failures_screenshot.py [--run logs/examples/planted_failures_trainer]

Serves the viewer on 127.0.0.1, opens the run in headless Chromium, shows accuracy (the planted NaN
datapoints make the mean cross-entropy of every epoch NaN, which draws no line), opens the Failures tab,
clicks the first slice (so the table and the score grid narrow to it) and saves a screenshot.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runners.eval_viewer.controls.ids import METRIC_SELECT
from runners.eval_viewer.failures.ids import FAILURES_FILTER_NOTE, FAILURES_PANEL, TAB_FAILURES
from runners.eval_viewer.scores.ids import SCORE_GRID
from runners.eval_viewer.table.ids import TABLE_CAPTION
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, serve_viewer  # noqa: E402
from tests.e2e.viewer_page import pick  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "images", "failures_tab.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="logs/examples/planted_failures_trainer")
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with serve_viewer([args.run]) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1250})
        page.set_default_timeout(120_000)
        page.goto(url, wait_until="networkidle")
        page.wait_for_selector(f"#{TABLE_CAPTION}:has-text('datapoints')")
        pick(page, METRIC_SELECT, "accuracy")
        page.wait_for_selector(f"#{TABLE_CAPTION}:has-text('sorted by accuracy')")
        page.click(f"#{TAB_FAILURES}")
        page.locator(f"#{FAILURES_PANEL} button").first.click()
        page.wait_for_selector(f"#{FAILURES_FILTER_NOTE}:has-text('Table filtered')")
        page.wait_for_selector(f"#{TABLE_CAPTION}:has-text('narrowed')")
        page.wait_for_selector(f"#{SCORE_GRID}:has-text('chosen datapoints')")
        page.wait_for_timeout(1000)
        page.screenshot(path=args.out, full_page=False)
        browser.close()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
