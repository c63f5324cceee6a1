"""Pictures in the viewer, in a real headless Chromium over real runs: the table's thumbnails (only the visible
rows', asked once the rows are shown), the Gallery of the table's rows (its filters, its order, a Debug Output
drawn over each input, a click opening the datapoint), and the score grid following the table's filters, its
colour bar titled and grey explained."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import PIL.Image
import pyarrow.parquet as pq
import pytest

from analysis.epoch_table import write_epoch_table
from benchmarks.viewer_browser import write_large_run
from run_dir.names import EPOCH_TABLE_FILE
from runners.eval_viewer.datapoint.ids import DATAPOINT_PANEL
from runners.eval_viewer.gallery import view as gallery
from runners.eval_viewer.gallery.ids import (
    GALLERY_CAPTION,
    GALLERY_ORDER,
    GALLERY_OVERLAY,
    GALLERY_PAGE,
    GALLERY_TILES,
    TAB_GALLERY,
)
from runners.eval_viewer.scores.ids import SCORE_GRID
from runners.eval_viewer.shared.ids import TABS
from runners.eval_viewer.table.ids import TABLE, TABLE_CAPTION, TABLE_CLEAR_FILTERS, TABLE_ROWS
from tests.e2e.conftest import DEBUGGER, expect, serve_viewer
from tests.e2e.viewer_page import (
    GRID,
    column,
    filter_column,
    pick,
    reload_noting_asked,
    wait_caption,
    wait_settled,
    wait_title,
)
from tests.runs import train, write_config

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

ROWS = 60  # more than the table shows at once, and than a gallery page holds
PICTURES_ASKED = """() => performance.getEntriesByType('resource').filter(e => e.name.includes('/lantern-picture?'))
    .map(e => [Object.fromEntries(new URL(e.name).searchParams), e.startTime])"""
ROWS_ANSWERED = """() => performance.getEntriesByType('resource').find(e => e.name.includes('_dash-update-component'))
    .responseEnd"""
DECODED = """(selector) => { const images = [...document.querySelectorAll(selector)];
    return images.length > 0 && images.every(img => img.complete && img.naturalWidth > 0); }"""


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pictures")
    (root / "configs").mkdir()
    train(write_config(root / "configs" / "run.py", root / "logs" / "run", epochs=1, val_size=ROWS, extra=DEBUGGER))
    return root / "logs"


def losses(logs) -> np.ndarray:
    return np.array(json.loads((logs / "run" / "epoch_0" / "validation_scores.json").read_text())
                    ["per_datapoint"]["cross_entropy"])


def tiles(page) -> list[int]:
    return [int(idx) for idx in page.locator(f"#{GALLERY_TILES} .gallery-tile").evaluate_all(
        "tiles => tiles.map(tile => tile.dataset.idx)")]


@pytest.mark.slow
def test_the_table_shows_thumbnails_of_its_visible_rows_only_asked_once_its_rows_are_shown(viewer_url, logs,
                                                                                           new_page):
    page = new_page(viewer_url)
    wait_caption(page, f"epoch 0: {ROWS} datapoints")
    page.wait_for_function(DECODED, arg=f"#{TABLE} img.thumbnail")
    shown = {int(idx) for idx in column(page, "idx")}
    asked = page.evaluate(PICTURES_ASKED)
    assert {int(query["idx"]) for query, _ in asked} <= shown < set(range(ROWS)), "pictures of rows not drawn"
    assert {query["run"] for query, _ in asked} == {str(logs / "run")}
    assert min(start for _, start in asked) >= page.evaluate(ROWS_ANSWERED), "a picture was asked before the rows"
    first = page.locator(f"#{TABLE} .ag-row[row-index='0'] img.thumbnail")
    picture = PIL.Image.open(io.BytesIO(page.request.get(first.evaluate("img => img.src")).body()))
    assert picture.size == (16, 16)  # the captured input, kept at its size


def test_the_gallery_shows_the_table_s_rows_in_its_order_under_its_filters_and_opens_one(viewer_url, logs, new_page):
    page = new_page(viewer_url)
    wait_caption(page, f"epoch 0: {ROWS} datapoints")
    order = np.argsort(-losses(logs), kind="stable").tolist()  # the table: the loss, highest first (ties by idx)
    lowest = np.argsort(losses(logs), kind="stable").tolist()
    page.click(f"#{TAB_GALLERY}")
    expect(page.locator(f"#{GALLERY_CAPTION}")).to_contain_text(f"{ROWS} datapoints, sorted by cross_entropy")
    assert tiles(page) == order[:gallery.PAGE_SIZE]
    page.locator(f"#{GALLERY_PAGE} a:text-is('2')").click()  # the second page: the rest
    expect(page.locator(f"#{GALLERY_CAPTION}")).to_contain_text(f"{gallery.PAGE_SIZE + 1}–{ROWS} shown")
    assert tiles(page) == order[gallery.PAGE_SIZE:]

    filter_column(page, "idx", "7")  # the table's filter: the gallery follows, from its first page
    expect(page.locator(f"#{GALLERY_CAPTION}")).to_contain_text(f"1 of {ROWS} datapoints match the table's filters")
    assert tiles(page) == [7]
    page.click(f"#{TABLE_CLEAR_FILTERS}")  # the gallery shows every row again (its answer also sets the order)
    expect(page.locator(f"#{GALLERY_CAPTION}")).to_contain_text(f"{ROWS} datapoints, sorted by cross_entropy")
    page.click(f"#{GALLERY_ORDER} label:has-text('lowest first')")  # sorting the gallery sorts the table
    wait_caption(page, "sorted by cross_entropy (lowest first)")
    expect(page.locator(f"#{GALLERY_CAPTION}")).to_contain_text("lowest first")
    assert tiles(page) == lowest[:gallery.PAGE_SIZE]

    pick(page, GALLERY_OVERLAY, "gradcam")
    expect(page.locator(f"#{GALLERY_CAPTION}")).to_contain_text("gradcam drawn over each input")
    first = page.locator(f"#{GALLERY_TILES} .gallery-picture").first
    page.wait_for_function(DECODED, arg=f"#{GALLERY_TILES} .gallery-tile:first-child img[src*='overlay=gradcam']")
    overlaid = page.request.get(first.evaluate("img => img.src")).body()
    plain = page.request.get(first.evaluate("img => img.src").replace("&overlay=gradcam", "")).body()
    assert overlaid != plain and PIL.Image.open(io.BytesIO(overlaid)).size == (16, 16)

    page.locator(f"#{GALLERY_TILES} .gallery-tile").nth(1).click()
    wait_title(page, DATAPOINT_PANEL, f"datapoint {lowest[1]} ")
    expect(page.locator(f"#{TABS} .tab--selected")).to_have_text("Datapoint")


@pytest.mark.slow
def test_a_link_to_the_gallery_opens_it_drawn_with_the_page(viewer_url, logs, new_page):
    page = new_page(f"{viewer_url}?run={logs / 'run'}&epoch=epoch_0&tab={TAB_GALLERY}&idx=3")
    asked = reload_noting_asked(page)
    wait_caption(page, f"epoch 0: {ROWS} datapoints")
    expect(page.locator(f"#{GALLERY_TILES} .gallery-tile.open")).to_have_attribute("data-idx", "3")
    assert len(tiles(page)) == gallery.PAGE_SIZE
    page.wait_for_function(DECODED, arg=f"#{GALLERY_TILES} .gallery-picture[src]")
    wait_settled(page)
    assert asked == [f"..{TABLE_ROWS}.data...{TABLE_CAPTION}.children.."], \
        "the gallery drawn for the first page ran callbacks (or its view of the table changed as the rows came)"


def test_the_score_grid_follows_the_table_s_filters_its_colour_bar_titled_and_grey_explained(tmp_path, new_page):
    run = write_large_run(str(tmp_path), 30)
    path = os.path.join(run, "epoch_1", EPOCH_TABLE_FILE)
    table = pq.read_table(path)
    columns = {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}
    columns["cross_entropy"] = columns["cross_entropy"].copy()
    columns["cross_entropy"][[3, 7, 11]] = np.nan  # a metric with no number for three datapoints
    write_epoch_table(path, columns, json.loads(table.schema.metadata[b"lantern.roles"]))
    with serve_viewer([str(tmp_path)]) as url:
        page = new_page(f"{url}?epoch=epoch_1")
        wait_caption(page, "epoch 1: 30 datapoints")
        note = page.locator(f"#{SCORE_GRID} .score-grid-note")
        expect(note).to_have_text("grey: 3 datapoints have no cross_entropy (NaN: the metric gave no number for "
                                  "them, e.g. a non-finite loss)")
        assert page.evaluate(GRID)["colorbar"] == "cross_entropy (lower is better)"
        assert page.evaluate(GRID)["idx"] == list(range(30))

        filter_column(page, "idx", "7")
        page.wait_for_function(f"() => ({GRID})().idx.join() === '7'")
        expect(page.locator(f"#{SCORE_GRID} .score-view-title")).to_contain_text(
            "cross_entropy of the datapoint the table shows")
        expect(note).to_contain_text("grey: 1 datapoint has no cross_entropy")
        page.click(f"#{TABLE_CLEAR_FILTERS}")
        page.wait_for_function(f"() => ({GRID})().idx.length === 30")
        page.close()  # before the server stops
