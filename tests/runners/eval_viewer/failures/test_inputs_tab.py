"""The Failures tab in a real headless Chromium shows the slices on what a token run's captured inputs hold: the
share of rare tokens (``analysis/rare_tokens.py``), its meaning among the notes, and a click that narrows the table
to the slice's datapoints, though the column is none of the table's."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.failures import analyze
from analysis.rare_tokens import MEANING
from runners.eval_viewer.failures.ids import FAILURES_FILTER_NOTE, FAILURES_FINDING
from tests.analysis.tables import capture_inputs, token_inputs
from tests.e2e.conftest import browser_or_skip
from tests.e2e.synthetic_runs import write_table_run
from tests.e2e.viewer_page import open_failures_tab, wait_caption, wait_rows
from tests.reliability.viewer_server import serve_viewer

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
ROWS = 600


@pytest.fixture(scope="module")
def token_run(tmp_path_factory):
    """Messages of which 40 hold rare tokens; those fail 90%, the others 10%: no table column says which."""
    rng = np.random.default_rng(0)
    rare = np.zeros(ROWS, dtype=bool)
    rare[rng.choice(ROWS, 40, replace=False)] = True
    label = rng.integers(0, 4, ROWS)
    wrong = rng.random(ROWS) < np.where(rare, 0.9, 0.1)
    prediction = np.where(wrong, (label + 1) % 4, label)
    run = write_table_run(str(tmp_path_factory.mktemp("tokens")), "tokens", label, prediction,
                          rng.uniform(0.1, 1.0, ROWS), meta={"hour": rng.uniform(0, 24, ROWS)})
    tokens, mask = token_inputs(rng, ROWS, rare)
    capture_inputs(run, {"tokens": tokens, "attention_mask": mask})
    return run, sorted(np.flatnonzero(rare).tolist())


def test_the_inputs_slice_is_listed_explained_and_narrows_the_table(token_run):
    browser_or_skip()
    from playwright.sync_api import sync_playwright

    run, rare = token_run
    found = analyze(run).inputs.slices[0]
    assert found.idx.tolist() == rare
    errors = []
    with sync_playwright() as playwright, serve_viewer([run]) as url:
        browser, page, shown = open_failures_tab(playwright, url, run, errors, "Inputs: slices")
        assert MEANING in shown and found.description in shown
        assert shown.index("Meta info: slices") < shown.index("Inputs: slices")
        page.locator(f"""[id='{{"index":"inslice-0","type":"{FAILURES_FINDING}"}}']""").click()
        page.locator(f"#{FAILURES_FILTER_NOTE}:has-text('rare_token_share')").wait_for()
        wait_caption(page, f"{len(rare)} of {ROWS}")
        wait_rows(page, set(rare))
        page.close()  # before its server stops: the page's refresh would find no server
        browser.close()
    assert not errors, f"the page logged errors: {errors}"
