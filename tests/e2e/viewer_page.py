"""What a user does on the viewer's page, as steps the browser tests share."""

from __future__ import annotations

import json

from benchmarks.viewer_browser import SHOWN
from runners.eval_viewer.compare_epochs.ids import COMPARE_EPOCHS_PANEL, TAB_COMPARE_EPOCHS
from runners.eval_viewer.controls.ids import REFRESH
from runners.eval_viewer.datapoint.ids import DATAPOINT_PANEL
from runners.eval_viewer.failures.ids import FAILURES_PANEL, TAB_FAILURES
from runners.eval_viewer.scores.ids import SCORE_GRID
from runners.eval_viewer.table.ids import TABLE, TABLE_CAPTION
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, SLOW_WAIT_MS

GRID = f"() => document.getElementById('{SCORE_GRID}').scoreGrid"  # what the grid's script drew (score_views.js)
# No callback of Dash's renderer is waiting, running or has an answer not yet applied (``callbacks`` of its store;
# ``stored`` and the ``completed`` count are done).
SETTLED = """() => window.store && Object.entries(window.store.getState().callbacks)
    .every(([kind, queue]) => kind === 'stored' || !Array.isArray(queue) || queue.length === 0)"""


def open_failures_tab(playwright, url: str, run: str, errors: list[str], shows: str):
    """A headless Chromium on ``run``'s Failures tab (the page's console errors go to ``errors``), once it shows the
    text ``shows``: (browser, page, the tab's text)."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.set_default_timeout(SLOW_WAIT_MS)  # the tab analyses the epoch when first shown: slow on a busy machine
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{url}/?run={run}&tab={TAB_FAILURES}")
    panel = page.locator(f"#{FAILURES_PANEL}")
    panel.locator(f"text={shows}").wait_for()
    return browser, page, panel.inner_text()


def pick(page, dropdown: str, label: str) -> None:
    """Choose the option ``label`` in the dropdown with id ``dropdown``."""
    page.click(f"#{dropdown}")
    page.get_by_role("option", name=label, exact=True).click()


def wait_caption(page, text: str) -> str:
    """Wait until the table's caption holds ``text`` (it names the epoch, so the table is current)."""
    page.wait_for_selector(f"#{TABLE_CAPTION}:has-text('{text}')")
    return page.locator(f"#{TABLE_CAPTION}").inner_text()


def wait_settled(page) -> None:
    """Wait until every callback the page started has answered and its answer is shown: what a change set off
    (a refresh tick, a late answer) has landed, so the page can be read without waiting for something to not
    happen."""
    page.wait_for_function(SETTLED)


# Every row the table draws holds its data: none is the placeholder the grid draws while a block of rows loads.
ROWS_DRAWN = """(table) => {
    const api = dash_ag_grid.getApi(table);
    const rows = [...document.querySelectorAll(`#${table} .ag-center-cols-container .ag-row`)];
    return rows.length > 0 && rows.every(row => {
        const node = api.getDisplayedRowAtIndex(Number(row.getAttribute('row-index')));
        return node && node.data;
    });
}"""


def column(page, name: str) -> list[str]:
    """The shown cells of a table column, top to bottom (rows in the order the table shows them), once every row
    drawn holds its data (after a new sort or filter the grid draws a placeholder row until its rows come)."""
    rows = page.locator(f"#{TABLE} .ag-center-cols-container .ag-row")
    page.wait_for_function(ROWS_DRAWN, arg=TABLE)
    cells = {int(row.get_attribute("row-index")): row.locator(f"[col-id='{name}']").inner_text()
             for row in rows.all()}
    return [cells[i] for i in sorted(cells)]


def wait_rows(page, expected: set[int]) -> None:
    """Wait until the table's rows (as its grid holds them, whatever is drawn) are the datapoints ``expected``."""
    page.wait_for_function("""([table, expected]) => {
        const api = dash_ag_grid.getApi(table);
        const shown = [];
        for (let i = 0; i < api.getDisplayedRowCount(); i++) {
            const node = api.getDisplayedRowAtIndex(i);
            if (!node || !node.data) { return false; }
            shown.push(node.data.idx);
        }
        return JSON.stringify(shown.sort((a, b) => a - b)) === JSON.stringify(expected);
    }""", arg=[TABLE, sorted(expected)])


def cell(page, row: int, name: str) -> str:
    """The text of a table cell (its column scrolled into view first where it is off screen)."""
    page.evaluate(f"dash_ag_grid.getApi('{TABLE}').ensureColumnVisible({name!r})")
    locator = page.locator(f"#{TABLE} .ag-center-cols-container .ag-row[row-index='{row}'] [col-id='{name}']")
    return locator.inner_text()


def set_filter(page, name: str, kind: str, text: str = "") -> None:
    """Set a column's filter through the table's own API, as its menu does (``kind``: 'blank', 'notBlank', ...)."""
    page.evaluate("""([table, name, kind, text]) => {
        const api = dash_ag_grid.getApi(table);
        const filterType = api.getColumnDef(name).filter === 'agNumberColumnFilter' ? 'number' : 'text';
        api.setFilterModel({[name]: {filterType, type: kind, filter: text || null}});
    }""", [TABLE, name, kind, text])


def filter_box(page, name: str):
    """The filter box under the column's header."""
    return page.locator(f"#{TABLE} .ag-header-row-filter input[aria-label='{name} Filter Input']:not([disabled])")


def filter_column(page, name: str, text: str) -> None:
    """Type into the column's filter box (what a user does to find a datapoint)."""
    filter_box(page, name).fill(text)


def open_row(page, row: int) -> str:
    """Click a table row; return the idx it shows."""
    cell = page.locator(f"#{TABLE} .ag-center-cols-container .ag-row[row-index='{row}'] [col-id='idx']")
    idx = cell.inner_text().strip()
    cell.click()
    return idx


def compare_first_row(page, caption: str) -> list[str]:
    """Once the table's caption holds ``caption``, open its first row in Compare epochs; the table's idx in order."""
    wait_caption(page, caption)
    order = column(page, "idx")
    open_row(page, 0)
    page.click(f"#{TAB_COMPARE_EPOCHS}")
    wait_title(page, COMPARE_EPOCHS_PANEL, f"datapoint {order[0]} ")
    return order


def wait_title(page, panel: str, text: str) -> None:
    page.wait_for_selector(f"#{panel} .datapoint-title:has-text('{text}')")


def debug_figures(page, panel: str = DATAPOINT_PANEL):
    """The drawn Debug Outputs figures of a panel: plotly graphs and maps drawn as pictures."""
    return page.locator(f"#{panel} .section-debug-outputs :is(.js-plotly-plot, img.picture)")


def grid_cell(page, column: int, row: int) -> tuple[float, float]:
    """The page point at the middle of a score grid cell (the grid scrolled into view), where its script drew it."""
    canvas = page.locator(f"#{SCORE_GRID} canvas")
    canvas.scroll_into_view_if_needed()
    box, grid = canvas.bounding_box(), page.evaluate(GRID)
    return (box["x"] + grid["plot"]["left"] + grid["cell"] * (column + 0.5),
            box["y"] + grid["plot"]["top"] + grid["cell"] * (row + 0.5))


def reload_noting_asked(page) -> list[str]:
    """Reload ``page``; the outputs of the callbacks the reloaded page asks the server for (filled as it asks), but
    for those of the 5 s refresh tick (a slow machine's page load can last until the first tick).

    The page's first load is waited for first: until the reloaded page comes, the old one goes on loading, and on
    a slow machine it asks for its own rows in the meantime."""
    page.wait_for_function(SHOWN)
    asked: list[str] = []

    def note(request) -> None:
        if "_dash-update-component" in request.url:
            body = json.loads(request.post_data or "{}")
            if body.get("changedPropIds") != [f"{REFRESH}.data"]:
                asked.append(body.get("output", ""))

    page.on("request", note)
    page.reload()
    return asked


# The texts of the elements matching a selector that their box cuts (shown with "…"): a test asserts none.
CUT_TEXT = """selector => [...document.querySelectorAll(selector)]
    .filter(element => element.scrollWidth > element.clientWidth).map(element => element.innerText)"""

# Whether the first element matching a selector is wide enough for the longest number the table's float columns
# write ('.4~g' writes -0.0001234 as "−0.0001234"), in its own font and padding.
FITS_LONGEST_NUMBER = """selector => {
    const cell = document.querySelector(selector), style = getComputedStyle(cell);
    const context = document.createElement('canvas').getContext('2d');
    context.font = style.font;
    const padding = parseFloat(style.paddingLeft) + parseFloat(style.paddingRight);
    return cell.clientWidth >= context.measureText('\u22120.0001234').width + padding;
}"""
