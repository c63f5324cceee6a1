"""The page's own layout in a real headless Chromium, at the widths it is used at: the score chart's and grid's
titles whole, the grid's colour-bar title beside its numbers, and a column's filter tooltip clear of the rows."""

from __future__ import annotations

import pytest

from benchmarks.viewer_browser import write_large_run
from runners.eval_viewer.scores.ids import SCORE_CHART, SCORE_GRID
from runners.eval_viewer.table.ids import TABLE
from tests.e2e.conftest import serve_viewer
from tests.e2e.viewer_page import GRID, wait_caption

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

# Whether the title's text fits its box: nothing scrolled out of it and its glyphs' box inside the element's
WHOLE = """(title) => { const range = document.createRange(); range.selectNodeContents(title);
    const text = range.getBoundingClientRect(), box = title.getBoundingClientRect();
    return title.scrollHeight <= title.clientHeight && text.bottom <= box.bottom && text.top >= box.top; }"""


@pytest.fixture(scope="module")
def viewer_url(tmp_path_factory):
    folder = tmp_path_factory.mktemp("layout")
    write_large_run(str(folder), 40)
    with serve_viewer([str(folder)]) as url:
        yield url


@pytest.mark.parametrize("width", [1500, 1920])
def test_the_score_views_titles_are_whole_and_the_colour_bar_title_beside_its_numbers(viewer_url, new_page, width):
    """both titles were cut at the bottom; the colour bar's title sat at the pane's right edge, far from its bar."""
    page = new_page(f"{viewer_url}?epoch=epoch_1", width=width)
    wait_caption(page, "epoch 1: 40 datapoints")
    page.wait_for_function(f"() => ({GRID})() && ({GRID})().colorbar")
    for view in (SCORE_CHART, SCORE_GRID):
        title = page.locator(f"#{view} .score-view-title")
        assert title.inner_text() and title.evaluate(WHOLE), f"the title of {view} is cut"
    drawn = page.evaluate(GRID)
    bar_right = drawn["plot"]["left"] + drawn["plot"]["width"] + 10 + 10  # the bar: 10 px past the cells, 10 wide
    assert bar_right < drawn["labelsRight"] < drawn["titleAt"] <= drawn["labelsRight"] + 20


def test_a_column_s_filter_tooltip_opens_clear_of_the_rows(viewer_url, new_page):
    """the tooltip of a column's filter examples opened under the pointer, over the first row."""
    page = new_page(f"{viewer_url}?epoch=epoch_1")
    wait_caption(page, "epoch 1: 40 datapoints")
    first_row = page.locator(f"#{TABLE} .ag-center-cols-container .ag-row[row-index='0']")
    first_row.wait_for()
    page.locator(f"#{TABLE} .ag-header-cell[col-id='label'] .ag-header-cell-text").hover()
    tooltip = page.locator(".ag-tooltip")
    tooltip.wait_for()
    assert "filter: > 2" in tooltip.inner_text()
    page.wait_for_function("""() => { const t = document.querySelector('.ag-tooltip');
        return t && getComputedStyle(t).opacity === '1'; }""")  # its fade-in over
    box, row = tooltip.bounding_box(), first_row.bounding_box()
    header = page.locator(f"#{TABLE} .ag-header").bounding_box()
    assert box["y"] + box["height"] <= header["y"] < row["y"], "the tooltip covers the table's rows"
