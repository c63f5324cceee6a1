"""How the viewer's first page loads, in real headless Chromium over a real server: every script comes from the
viewer, plotly.js only once the table has asked for its rows, the page asks the server for nothing but the table's
rows, and the score chart and grid come with the layout, drawn by the page's own script: the grid's cells in the
colours of their scores, their values on hover, a click opening one, the open datapoint marked."""

from __future__ import annotations

import numpy as np
import plotly.colors
import pyarrow.parquet as pq
import pytest
from plotly.offline import get_plotlyjs_version

from benchmarks.viewer_browser import SHOWN, write_large_run
from run_dir.names import EPOCH_TABLE_FILE
from runners.eval_viewer.controls.ids import EPOCH_BADGES
from runners.eval_viewer.datapoint.ids import DATAPOINT_PANEL
from runners.eval_viewer.scores.ids import SCORE_CHART, SCORE_CHART_DATA, SCORE_GRID, SCORE_GRID_DATA
from runners.eval_viewer.shared.plotly_bundle import plotly_url
from runners.eval_viewer.table.ids import TABLE_CAPTION, TABLE_ROWS
from tests.e2e.conftest import serve_viewer
from tests.e2e.viewer_page import GRID, grid_cell, reload_noting_asked, wait_caption, wait_title

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

SCRIPTS = """() => performance.getEntriesByType('resource').filter(e => e.initiatorType === 'script'
    || e.name.endsWith('.js') || e.name.includes('.js?')).map(e => [e.name, e.startTime])"""
FIRST_ASKED = """(path) => performance.getEntriesByType('resource').find(e => e.name.includes(path)).startTime"""
PLOTLY_LOADED = "() => typeof window.Plotly.newPlot === 'function'"
PIXEL = f"""([x, y]) => {{  // the grid's colour at a point of the page
    const canvas = document.querySelector('#{SCORE_GRID} canvas'), box = canvas.getBoundingClientRect();
    return Array.from(canvas.getContext('2d').getImageData((x - box.left) * devicePixelRatio,
        (y - box.top) * devicePixelRatio, 1, 1).data.slice(0, 3)); }}"""


@pytest.fixture(scope="module")
def viewer_url(tmp_path_factory):
    """A run of two epochs of 30 datapoints (epoch tables and scores, as a trainer writes them)."""
    root = tmp_path_factory.mktemp("page_load")
    run = write_large_run(str(root), 30)
    with serve_viewer([str(root)]) as url:
        yield url, run


def test_bootstrap_styles_the_page_from_the_viewer_itself(viewer_url, new_page):
    """dash-bootstrap-components lays the page out (navbar, badges, alerts, cards); Bootstrap's stylesheet is served
    by the viewer, never a CDN (machines here are offline)."""
    page = new_page(viewer_url[0])
    page.wait_for_function(SHOWN)
    sheets = page.evaluate("() => [...document.styleSheets].map(sheet => sheet.href).filter(Boolean)")
    assert all(href.startswith(viewer_url[0].rstrip("/")) for href in sheets), sheets
    assert any("/assets/bootstrap.min.css" in href for href in sheets)
    brand = page.locator(".navbar.bg-dark .navbar-brand")
    assert brand.inner_text() == "Lantern eval viewer"
    assert page.evaluate("() => getComputedStyle(document.querySelector('.navbar.bg-dark')).backgroundColor") == \
        "rgb(33, 37, 41)"  # Bootstrap's dark
    badge = page.locator(f"#{EPOCH_BADGES} .badge").first
    assert badge.evaluate("element => getComputedStyle(element).borderRadius") != "0px"


def test_plotly_js_comes_from_the_viewer_once_the_table_has_asked_for_its_rows(viewer_url, new_page):
    """The first page draws no plotly graph: plotly.js (the viewer's slim bundle) is loaded after the table's rows
    are asked for, ready for the first datapoint opened; every script comes from the viewer."""
    page = new_page(viewer_url[0])
    page.wait_for_function(SHOWN)
    page.wait_for_function(PLOTLY_LOADED)  # loaded when the browser is idle, for the first datapoint opened
    scripts = page.evaluate(SCRIPTS)
    assert all(name.startswith(viewer_url[0].rstrip("/")) for name, _ in scripts), scripts
    plotly = plotly_url("/", get_plotlyjs_version())  # the slim bundle, unless plotly.py expects another plotly.js
    (plotly_asked,) = [start for name, start in scripts if plotly in name]
    assert plotly_asked > page.evaluate(FIRST_ASKED, "/_dash-update-component")


def test_the_first_page_asks_the_server_for_the_table_s_rows_only(viewer_url, new_page):
    page = new_page(viewer_url[0])
    asked = reload_noting_asked(page)
    page.wait_for_function(SHOWN)
    page.wait_for_function(PLOTLY_LOADED)
    assert asked == [f"..{TABLE_ROWS}.data...{TABLE_CAPTION}.children.."], \
        "the hidden tabs' callbacks (or the score views') ran for the first page"


def test_the_score_grid_and_chart_come_with_the_page_drawn_by_its_script(viewer_url, new_page):
    url, run = viewer_url
    page = new_page(f"{url}?epoch=epoch_1&idx=7")
    asked = reload_noting_asked(page)
    page.wait_for_function(SHOWN)
    wait_caption(page, "epoch 1: 30 datapoints")
    assert not [output for output in asked if SCORE_CHART_DATA in output or SCORE_GRID_DATA in output]
    assert page.locator(f"#{SCORE_CHART} .score-line").count() == 1
    assert page.locator(f"#{SCORE_CHART} .score-point").count() == 2  # epochs 0 and 1
    assert page.locator(f"#{SCORE_CHART} .chosen-epoch").count() == 1

    grid = page.evaluate(GRID)
    assert grid["idx"] == list(range(30)) and grid["mark"] == [1, 1]  # idx 7 in a 6 x 5 grid: column 1, row 1
    table = pq.read_table(f"{run}/epoch_1/{EPOCH_TABLE_FILE}", columns=["idx", "cross_entropy"]).to_pydict()
    values = np.array(table["cross_entropy"])
    scale = plotly.colors.get_colorscale("RdYlGn_r")  # the loss: red for high
    for idx in (0, 7, int(values.argmax()), int(values.argmin()), 29):
        row, column = divmod(idx, 6)
        x, y = grid_cell(page, column, row)
        value = float(f"{values[idx]:.4g}")
        share = (value - float(f"{values.min():.4g}")) / (float(f"{values.max():.4g}") - float(f"{values.min():.4g}"))
        expected = plotly.colors.unlabel_rgb(plotly.colors.sample_colorscale(scale, [share])[0])
        assert page.evaluate(PIXEL, [x + 2, y + 2]) == pytest.approx(expected, abs=2), idx
        page.mouse.move(x, y)
        assert page.locator(".score-grid-tooltip").inner_text() == f"idx {idx}: cross_entropy {values[idx]:.4g}"
    page.mouse.click(*grid_cell(page, 2, 3))  # column 2, row 3: idx 20
    wait_title(page, DATAPOINT_PANEL, "datapoint 20 ")
    page.wait_for_function(f"() => ({GRID})().mark[0] === 2 && ({GRID})().mark[1] === 3")


def test_a_score_view_waiting_for_its_element_draws_the_latest_data_only(viewer_url, new_page):
    """A draw that waits for its element (Dash may run it before React has put the element in the page) is
    dropped once newer data is drawn: it would draw the older data over the newer."""
    page = new_page(viewer_url[0])
    page.wait_for_function(SHOWN)
    drawn = page.evaluate("""async () => {
        window.lanternScoreViews.drawChart('late-chart', {title: 'older'});  // no element yet: tried again
        const container = document.createElement('div');
        container.id = 'late-chart';
        document.body.appendChild(container);
        window.lanternScoreViews.drawChart('late-chart', {title: 'newer'});
        await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
        return container.textContent;
    }""")
    assert drawn == "newer"


def test_the_score_grid_s_tooltip_goes_with_the_grid_it_describes(viewer_url, new_page):
    page = new_page(f"{viewer_url[0]}?epoch=epoch_1")
    page.wait_for_function(SHOWN)
    page.mouse.move(*grid_cell(page, 0, 0))  # over idx 0
    tooltip = page.locator(".score-grid-tooltip")
    assert tooltip.is_visible()
    page.evaluate(f"dash_clientside.set_props('{SCORE_GRID_DATA}', {{data: {{title: 'no scores'}}}})")
    page.wait_for_selector(f"#{SCORE_GRID} canvas", state="detached")
    assert not tooltip.is_visible(), "the tooltip of a grid no longer drawn stays on screen"
