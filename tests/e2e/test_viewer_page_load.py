"""How the viewer's first page loads, in real headless Chromium over a real server: every script comes with the
page (none is fetched after the layout), the scripts the viewer does not use stay out, and the score chart and
grid come drawn with the layout instead of from a first round of callbacks."""

from __future__ import annotations

import json

import pytest

from benchmarks.viewer_browser import SHOWN, write_large_run
from runners.eval_viewer.layout import ids
from tests.e2e.conftest import serve_viewer
from tests.e2e.viewer_page import wait_caption

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

SCRIPTS = """() => performance.getEntriesByType('resource').filter(e => e.initiatorType === 'script'
    || e.name.endsWith('.js') || e.name.includes('.js?')).map(e => [e.name, e.startTime])"""
LAYOUT_ASKED = """() => performance.getEntriesByType('resource').find(e => e.name.includes('/_dash-layout'))
    .startTime"""
MARK = """() => { const trace = document.querySelector('#GRID .js-plotly-plot')._fullData[1];
    return [Array.from(trace.x), Array.from(trace.y)]; }""".replace("GRID", ids.SCORE_GRID)


@pytest.fixture(scope="module")
def viewer_url(tmp_path_factory):
    """A run of two epochs of 30 datapoints (epoch tables and scores, as a trainer writes them)."""
    root = tmp_path_factory.mktemp("page_load")
    write_large_run(str(root), 30)
    with serve_viewer([str(root)]) as url:
        yield url


def test_the_first_page_fetches_every_script_with_the_page_and_only_those_it_uses(viewer_url, new_page):
    page = new_page(viewer_url)
    page.wait_for_function(SHOWN)
    scripts = page.evaluate(SCRIPTS)
    names = [name for name, _ in scripts]
    assert not [name for name in names if "polyfill" in name or "dash_table" in name], names
    assert any("async-community" in name for name in names) and any("async-graph" in name for name in names)
    layout_asked = page.evaluate(LAYOUT_ASKED)
    late = [name for name, start in scripts if start > layout_asked]
    assert not late, f"scripts fetched only after the layout (a second round before the page is drawn): {late}"


def test_the_score_chart_and_grid_come_with_the_page_marking_the_open_datapoint(viewer_url, new_page):
    asked = []
    page = new_page(f"{viewer_url}?epoch=epoch_1&idx=7")
    page.on("request", lambda request: asked.append(json.loads(request.post_data or "{}").get("output", ""))
            if "_dash-update-component" in request.url else None)
    page.reload()
    page.wait_for_function(SHOWN)
    wait_caption(page, "epoch 1: 30 datapoints")
    assert page.locator(f"#{ids.SCORE_CHART} .scatterlayer .trace").count() == 1
    assert page.evaluate(MARK) == [[1], [1]]  # idx 7 of 30 in a 6 x 5 grid: row 1, column 1
    drawn_by_callbacks = [output for output in asked if ids.SCORE_CHART in output
                          or (f"{ids.SCORE_GRID}.figure" in output and "@" not in output)]  # "@": the mark's patch
    assert not drawn_by_callbacks, f"the first page asked the server for {drawn_by_callbacks}"
