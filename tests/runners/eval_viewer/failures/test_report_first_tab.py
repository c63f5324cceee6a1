"""The Failures tab in a real headless Chromium shows first what a practitioner reads first: the main confusions
at its top (a click narrows the table to that confusion's datapoints), and, where the evidence is too weak to name a
slice, why, in numbers: what ``analyze`` returns, on a run of 240 datapoints whose 4 failures all have site C."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.failures import analyze
from runners.eval_viewer.failures.ids import FAILURES_FILTER_NOTE, FAILURES_FINDING
from tests.e2e.conftest import browser_or_skip, expect
from tests.e2e.synthetic_runs import write_table_run
from tests.e2e.viewer_page import open_failures_tab, wait_caption, wait_rows
from tests.reliability.viewer_server import serve_viewer

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
ROWS = 240


@pytest.fixture(scope="module")
def few_failures(tmp_path_factory):
    """Circles read as rings three times and a square read as a star once, all four at site C (82 datapoints)."""
    rng = np.random.default_rng(0)
    label = rng.integers(0, 6, ROWS)
    site = np.array(["A"] * 80 + ["B"] * 78 + ["C"] * 82, dtype=object)
    prediction = label.copy()
    at_c = np.flatnonzero(site == "C")
    circles, squares = at_c[label[at_c] == 0][:3], at_c[label[at_c] == 1][:1]
    prediction[circles], prediction[squares] = 4, 5
    folder = tmp_path_factory.mktemp("few_failures")
    run = write_table_run(str(folder), "few", label, prediction, rng.uniform(0.1, 1.0, ROWS),
                          meta={"site": site, "shift": rng.choice(["day", "night"], ROWS).astype(object)})
    return run, sorted(circles.tolist())


def test_the_confusions_come_first_and_a_missing_slice_says_why(few_failures):
    browser_or_skip()
    from playwright.sync_api import sync_playwright

    run, circles = few_failures
    findings = analyze(run)
    assert findings.meta.slices == [] and findings.confusions[0].description == "circle read as ring"
    errors = []
    with sync_playwright() as playwright, serve_viewer([run]) as url:
        browser, page, shown = open_failures_tab(playwright, url, run, errors, "Main confusions")
        assert shown.index("Main confusions") < shown.index("Meta info: slices")
        assert "(3 of the 4 failures)" in shown  # the square read as a star is one: not a main confusion
        assert f"Why none: {findings.meta.no_slice.description}" in shown
        assert "site = C, with 4 of the 4 failures" in findings.meta.no_slice.description
        page.locator(f"""[id='{{"index":"confusion-0","type":"{FAILURES_FINDING}"}}']""").click()
        wait_caption(page, f"3 of {ROWS}")
        note = page.locator(f"#{FAILURES_FILTER_NOTE}")
        expect(note).to_have_text("Table filtered to 3 datapoints: circle read as ring")
        wait_rows(page, set(circles))
        page.close()  # before its server stops: the page's refresh would find no server
        browser.close()
    assert not errors, f"the page logged errors: {errors}"
