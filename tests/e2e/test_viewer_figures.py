"""What the viewer draws, checked in a real headless Chromium over a real two-epoch run: class names in
badges and Grad-CAM titles, Grad-CAM of label and prediction (a picture), Compare epochs as aligned rows,
tables as text and the input image as a plain image, dropdown options never under their search box."""

from __future__ import annotations

import re
import shutil
from urllib.parse import urlencode

import numpy as np
import pytest

from analysis.epoch_table import EpochTable
from run_dir.names import EPOCH_TABLE_FILE
from runners.eval_viewer.compare_epochs.ids import COMPARE_EPOCHS_PANEL, TAB_COMPARE_EPOCHS
from runners.eval_viewer.controls.ids import RUN_SELECT
from runners.eval_viewer.datapoint.ids import DATAPOINT_PANEL, TAB_DATAPOINT
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.datapoint import load_datapoint
from runners.eval_viewer.table.ids import TABLE, TABLE_CAPTION
from tests.e2e.conftest import DEBUGGER, expect
from tests.e2e.viewer_page import wait_title
from tests.pictures import feature_map_colours, mosaic_blocks, mosaic_maps, png_pixels
from tests.runs import train, write_config

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

MORE_DEBUGGERS = DEBUGGER + """
from debuggers.activation_stats_debugger import ActivationStatsDebugger
from debuggers.feature_map_debugger import FeatureMapDebugger
config["debugger"]["args"]["debuggers_config"] = [  # the Datapoint tab draws the first three until others are ticked
    {"name": "stats", "debugger_config": {"class": ActivationStatsDebugger, "args": {"layer_name": "backbone.layer3"}}},
    *config["debugger"]["args"]["debuggers_config"],
    {"name": "features", "debugger_config": {"class": FeatureMapDebugger, "args": {"layer_name": "backbone.layer4"}}}]
"""
# The captions and the maps' (x, y) in a picture's SVG, as the browser reads them.
PICTURE_PARTS = """img => {
    const svg = new DOMParser().parseFromString(atob(img.src.split(',')[1]), 'image/svg+xml');
    return {texts: [...svg.querySelectorAll('text')].map(t => t.textContent),
            images: [...svg.querySelectorAll('image')].map(i => ['x', 'y'].map(a => Number(i.getAttribute(a))))};
}"""
DRAWN_Y = "g => Array.from(g._fullData[0].y)"  # what plotly drew: the y of a graph's first trace
COPIES = ("copy_a", "copy_b", "copy_c", "copy_d", "copy_e")  # runs enough for the run list to scroll


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("figures")
    work_dir = train(write_config(root / "run.py", root / "logs" / "run", epochs=2, checkpoint_method=1,
                                  train_size=32, val_size=12, extra=MORE_DEBUGGERS))
    for name in COPIES:
        shutil.copytree(work_dir, root / "logs" / name)
    return root / "logs"


def _url(base: str, run, **params) -> str:
    return f"{base}?{urlencode({'run': str(run), 'epoch': 'epoch_1', **params})}"


def _wrong_row(run) -> dict:
    rows = EpochTable(str(run / "epoch_1" / EPOCH_TABLE_FILE)).page(limit=100)
    return next(row for row in rows if row["label"] != row["prediction"])


def _block(page, name: str):
    """The card of debugger ``name`` in the open panel."""
    return page.locator(".debugger-block", has=page.locator(".card-header", has_text=name)).first


def test_a_wrong_datapoint_names_its_classes_and_shows_grad_cam_for_label_and_prediction(viewer_url, logs, new_page):
    row = _wrong_row(logs / "run")
    page = new_page(_url(viewer_url, logs / "run", idx=row["idx"]))
    page.wait_for_selector(f"#{DATAPOINT_PANEL} .badge-label")
    assert page.locator(".badge-label").inner_text() == f"label {row['label_name']} ({row['label']})"
    assert page.locator(".badge-prediction").inner_text() == \
        f"prediction {row['prediction_name']} ({row['prediction']})"
    assert page.locator(".label-class").inner_text() == f"{row['label_name']} ({row['label']})"
    cam = _block(page, "gradcam").locator("img.picture")  # drawn as a picture: nothing for plotly on a click
    cam.wait_for()
    assert cam.evaluate("img => img.complete && img.naturalWidth > 0")
    panels = cam.evaluate(PICTURE_PARTS)
    assert panels["texts"][:2] == [f"label: {row['label_name']}", f"prediction: {row['prediction_name']}"]
    assert len(panels["images"]) == 2 and panels["images"][0][1] == panels["images"][1][1]  # side by side
    assert _block(page, "gradcam").locator(".js-plotly-plot").count() == 0


# A picture as the page shows it: its box on the page, and its SVG laid out off screen to read its parts' boxes (in
# the SVG's units): texts with their font size, images with their PNG's address, and the units it spans across.
PICTURE = """img => {
    const bytes = Uint8Array.from(atob(img.src.split(',')[1]), (c) => c.charCodeAt(0));
    const svg = new DOMParser().parseFromString(new TextDecoder().decode(bytes), 'image/svg+xml').documentElement;
    const holder = document.createElement('div');
    holder.style.cssText = 'position: absolute; left: -10000px; top: 0';
    holder.appendChild(document.importNode(svg, true));
    document.body.appendChild(holder);
    const drawn = holder.firstChild, rect = (b) => [b.x, b.y, b.x + b.width, b.y + b.height];
    const page = img.getBoundingClientRect(), cell = img.closest('.compare-cell').getBoundingClientRect();
    const parts = {
        texts: [...drawn.querySelectorAll('text')].map(t => ({text: t.textContent, box: rect(t.getBBox()),
                                                             size: Number(t.getAttribute('font-size'))})),
        images: [...drawn.querySelectorAll('image')].map(i => ({href: i.getAttribute('href'), box: rect(i.getBBox())})),
        units: drawn.viewBox.baseVal.width, box: [page.left, page.top, page.right, page.bottom],
        cell: [cell.left, cell.right], complete: img.complete && img.naturalWidth > 0};
    holder.remove();
    return parts;
}"""


def _row_pictures(page, name: str, count: int) -> list[dict]:
    """The pictures of debugger ``name``'s first row in Compare epochs, once ``count`` of them are decoded."""
    pictures = _block(page, name).locator(".compare-figure-row").first.locator("img.picture")
    expect(pictures).to_have_count(count)
    page.wait_for_function("row => row.every(img => img.complete && img.naturalWidth)", arg=pictures.element_handles())
    return [pictures.nth(i).evaluate(PICTURE) for i in range(count)]


def _texts(picture: dict) -> list[str]:
    return [text["text"] for text in picture["texts"]]


def _check_compared_feature_maps(page, backend, run, epochs, idx: int) -> None:
    """The features row shows datapoint ``idx``'s captured maps, pixel for pixel: the same channels in each epoch's
    column on one colour scale, their difference on a scale centred on 0, each colour bar titled with its unit."""
    wait_title(page, COMPARE_EPOCHS_PANEL, f"datapoint {idx} ")
    pictures = _row_pictures(page, "features", len(epochs) + 1)
    assert all(picture["complete"] for picture in pictures)
    captions = [_texts(picture)[:16] for picture in pictures]
    assert all(caption == captions[0] for caption in captions) and len(captions[0]) == 16
    channels = [int(caption.split()[1]) for caption in captions[0]]
    captured = [load_datapoint(backend, run, epoch, idx)["debug"]["features"] for epoch in epochs]
    maps = [np.stack([out["feature_map"][list(out["channel_indices"]).index(c)] for c in channels]) for out in captured]
    for picture, colours in zip(pictures, feature_map_colours(maps)):
        (image,) = picture["images"]
        np.testing.assert_allclose(mosaic_maps(png_pixels(image["href"])), colours, atol=1)
    low, high = min(m.min() for m in maps), max(m.max() for m in maps)
    bound = np.abs(maps[-1] - maps[0]).max()
    assert _texts(pictures[0])[16:] == []  # the row's scale is shared: its bar is drawn once, in the last epoch
    assert _texts(pictures[-2])[16:] == [f"{v:.3g}" for v in (low, (low + high) / 2, high)] + ["activation"]
    assert _texts(pictures[-1])[16:] == [f"{v:.3g}" for v in (-bound, 0.0, bound)] + ["Δ activation"]


def test_compare_epochs_draws_the_asked_datapoint_s_captured_maps(viewer_url, logs, new_page):
    """Maps are pictures whose pixels are the captured arrays of the datapoint asked for, also after ``j`` moved
    on to the next one; the other rows are text or graphs drawn when in view."""
    backend = ViewerBackend([str(logs)])
    run = backend.run(str(logs / "run"))
    epochs = [epoch for epoch in backend.epochs(run) if epoch.has_debug]
    page = new_page(_url(viewer_url, logs / "run", idx=3, tab=TAB_COMPARE_EPOCHS))
    _check_compared_feature_maps(page, backend, run, epochs, 3)
    headings = page.locator(f"#{COMPARE_EPOCHS_PANEL} .compare-headings").inner_text()
    assert "epoch 0" in headings and "epoch 1" in headings and "epoch 1 − epoch 0" in headings
    assert page.locator(f"#{COMPARE_EPOCHS_PANEL} .dash-graph").count() == 0  # nothing drawn by plotly at once
    means = _block(page, "stats").locator(".compare-figure-row").nth(2).locator(".lazy-graph")
    expect(means).to_have_count(3)  # both epochs and the difference, drawn when scrolled to
    means.first.scroll_into_view_if_needed()
    means.nth(1).locator(".main-svg").first.wait_for()
    ranges = [means.nth(i).evaluate("gd => gd._fullLayout.yaxis.range") for i in range(2)]
    assert ranges[0] == ranges[1]  # one axis for the row

    page.click(f"#{TAB_DATAPOINT}")
    page.locator(f"#{TABLE} .ag-row.open-datapoint").wait_for()  # the table knows the open row: j steps on
    page.keyboard.press("j")
    page.wait_for_function(f"() => (title => title && !title.innerText.startsWith('datapoint 3 '))"
                           f"(document.querySelector('#{DATAPOINT_PANEL} .datapoint-title'))")
    following = int(page.locator(f"#{DATAPOINT_PANEL} .datapoint-title").inner_text().split()[1])
    page.click(f"#{TAB_COMPARE_EPOCHS}")
    _check_compared_feature_maps(page, backend, run, epochs, following)


def _overlap(a: list[float], b: list[float]) -> bool:
    return min(a[2], b[2]) - max(a[0], b[0]) > 0.5 and min(a[3], b[3]) - max(a[1], b[1]) > 0.5


@pytest.mark.parametrize("width, height", [(1600, 1000), (1280, 800)])
def test_every_column_of_compare_epochs_is_readable_at_the_usual_widths(viewer_url, logs, new_page, width, height):
    """The last epoch's column and the difference are as large as the others (their colour bars lie under the
    maps, the others keep the room), the maps of a row level, text no smaller than 8 px, titles whole, and
    channel captions cover neither each other nor the maps."""
    page = new_page(_url(viewer_url, logs / "run", idx=3, tab=TAB_COMPARE_EPOCHS), width, height)
    for name in ("features", "gradcam"):
        pictures = _row_pictures(page, name, 3)
        boxes = [picture["box"] for picture in pictures]
        assert np.allclose([[box[2] - box[0], box[3] - box[1], box[1]] for box in boxes],
                           [boxes[0][2] - boxes[0][0], boxes[0][3] - boxes[0][1], boxes[0][1]], atol=1), boxes
        for picture in pictures:
            assert picture["cell"][0] <= picture["box"][0] and picture["box"][2] <= picture["cell"][1] + 0.5
            scale = (picture["box"][2] - picture["box"][0]) / picture["units"]
            assert min(text["size"] for text in picture["texts"]) * scale >= 8, (name, scale)
            captions = [text["box"] for text in picture["texts"] if text["text"].startswith("ch ")]
            maps = []
            for image in picture["images"]:
                pixels = png_pixels(image["href"])
                x0, y0, x1, y1 = image["box"]
                across, down = (x1 - x0) / pixels.shape[1], (y1 - y0) / pixels.shape[0]
                maps += [[x0 + c0 * across, y0 + r0 * down, x0 + c1 * across, y0 + r1 * down]
                         for r0, r1, c0, c1 in (mosaic_blocks(pixels) if captions else [])]
            assert not [(a, b) for i, a in enumerate(captions) for b in captions[i + 1:] + maps if _overlap(a, b)]
    titles = page.locator(f"#{COMPARE_EPOCHS_PANEL} .compare-cell .figure-title")
    assert titles.count() and not titles.evaluate_all("ts => ts.filter(t => t.scrollWidth > t.clientWidth + 1)")


def test_statistics_are_a_text_table_of_every_statistic_and_the_input_a_plain_image(viewer_url, logs, new_page):
    """Tables and the input image are plain HTML (nothing for plotly to draw on a click), with the run's
    numbers."""
    backend = ViewerBackend([str(logs)])
    run = backend.run(str(logs / "run"))
    datapoint = load_datapoint(backend, run, backend.epoch(run, "epoch_1"), 0)
    page = new_page(_url(viewer_url, logs / "run", idx=0))
    table = _block(page, "stats").locator(".table-figure pre")
    table.wait_for()
    assert _block(page, "stats").locator(".table-figure .js-plotly-plot").count() == 0
    shown = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in table.inner_text().splitlines()[1:])
    stats = datapoint["debug"]["stats"]
    expected = {key: value for key, value in stats.items() if np.ndim(value) == 0 and key not in ("kind", "layer_name")}
    assert set(expected) <= set(shown)
    for key, value in expected.items():
        assert shown[key] == (f"{value:.6g}" if isinstance(value, (float, np.floating)) else str(value)), key
    image = page.locator(f"#{DATAPOINT_PANEL} .section-inputs img")
    assert image.evaluate("img => img.complete && img.naturalWidth") == np.shape(datapoint["inputs"]["image"])[-1]


def test_a_graph_below_the_fold_is_drawn_when_scrolled_to_and_follows_the_open_datapoint(viewer_url, logs, new_page):
    backend = ViewerBackend([str(logs)])
    run = backend.run(str(logs / "run"))
    epoch = backend.epoch(run, "epoch_1")
    first, second = (row["idx"] for row in EpochTable(str(logs / "run" / "epoch_1" / EPOCH_TABLE_FILE)).page(
        order_by="cross_entropy", descending=True, limit=2))  # the table's first two rows
    page = new_page(_url(viewer_url, logs / "run", idx=first))
    means = _block(page, "stats").locator(".lazy-graph").last  # the channel means, under the statistics
    means.wait_for(state="attached")
    assert means.evaluate("g => g.getBoundingClientRect().top > window.innerHeight + 100")
    assert means.locator(".main-svg").count() == 0  # below the fold: not drawn with the datapoint
    means.scroll_into_view_if_needed()
    means.locator(".main-svg").first.wait_for()
    expected = load_datapoint(backend, run, epoch, first)["debug"]["stats"]["channel_means"]
    assert means.evaluate(DRAWN_Y) == pytest.approx(np.asarray(expected).tolist())

    page.locator(f"#{TABLE} .ag-row[row-id='{second}']").wait_for(state="attached")  # the rows are loaded
    page.keyboard.press("j")  # the table's next row, drawn in the same place (in view now)
    page.wait_for_selector(f"#{DATAPOINT_PANEL} .datapoint-title:has-text('datapoint {second} ')")
    expected = load_datapoint(backend, run, epoch, second)["debug"]["stats"]["channel_means"]
    page.wait_for_function("([g, y]) => g._fullData && g._fullData[0].y.length === y.length "
                           "&& Array.from(g._fullData[0].y).every((v, i) => Math.abs(v - y[i]) < 1e-6)",
                           arg=[means.element_handle(), np.asarray(expected).tolist()])


def test_dropdown_options_never_lie_under_the_search_box(viewer_url, logs, new_page):
    page = new_page(_url(viewer_url, logs / COPIES[-1]))  # its option is the last: the list opens scrolled
    page.wait_for_selector(f"#{TABLE_CAPTION}:has-text('epoch 1')")
    page.click(f"#{RUN_SELECT}")
    page.locator(".dash-dropdown-search").wait_for()
    overlaps = page.evaluate("""() => {
        const search = document.querySelector('.dash-dropdown-search-container').getBoundingClientRect();
        const list = document.querySelector('.dash-dropdown-options').getBoundingClientRect();
        const shown = [...document.querySelectorAll('[role=option]')].map(o => o.getBoundingClientRect())
            .map(r => [Math.max(r.top, list.top), Math.min(r.bottom, list.bottom)]).filter(([t, b]) => b > t);
        return shown.filter(([top, bottom]) => top < search.bottom - 1 && bottom > search.top + 1).length; }""")
    assert overlaps == 0
    assert page.get_by_role("option", name=f"{COPIES[-1]} (trainer)").is_visible()
