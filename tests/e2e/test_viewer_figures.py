"""What the viewer draws, checked in a real headless Chromium over a real two-epoch run: class names in
badges and Grad-CAM titles, Grad-CAM of label and prediction (a picture), Compare epochs as aligned rows,
tables as text and the input image as a plain image, dropdown options never under their search box."""

from __future__ import annotations

import re
import shutil
from urllib.parse import urlencode

import numpy as np
import pytest

from analysis.epoch_table import EPOCH_TABLE_FILE, EpochTable
from runners.eval_viewer.backend.datapoint import load_datapoint
from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.layout import ids
from tests.e2e.conftest import DEBUGGER
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


def _annotations(plot) -> list[str]:
    return [text.strip() for text in plot.locator(".annotation-text").all_text_contents()]


def test_a_wrong_datapoint_names_its_classes_and_shows_grad_cam_for_label_and_prediction(viewer_url, logs, new_page):
    row = _wrong_row(logs / "run")
    page = new_page(_url(viewer_url, logs / "run", idx=row["idx"]))
    page.wait_for_selector(f"#{ids.DATAPOINT_PANEL} .badge-label")
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


def test_compare_epochs_shows_aligned_rows_on_shared_scales_and_a_difference(viewer_url, logs, new_page):
    page = new_page(_url(viewer_url, logs / "run", idx=3, tab=ids.TAB_COMPARE_EPOCHS))
    page.wait_for_selector(f"#{ids.COMPARE_EPOCHS_PANEL} .compare-figure-row .js-plotly-plot .annotation-text")
    headings = page.locator(f"#{ids.COMPARE_EPOCHS_PANEL} .compare-headings").inner_text()
    assert "epoch 0" in headings and "epoch 1" in headings and "epoch 1 − epoch 0" in headings
    plots = _block(page, "features").locator(".compare-figure-row").first.locator(".js-plotly-plot")
    assert plots.count() == 3  # epoch 0, epoch 1, their difference
    channels = [_annotations(plots.nth(i)) for i in range(3)]
    assert channels[0] == channels[1] == channels[2] and len(channels[0]) == 16
    scales = [plots.nth(i).evaluate("gd => [gd._fullData[0].zmin, gd._fullData[0].zmax]") for i in range(2)]
    assert scales[0] == scales[1]
    low, high = plots.nth(2).evaluate("gd => [gd._fullData[0].zmin, gd._fullData[0].zmax]")
    assert low == -high  # the difference is centred on 0
    means = _block(page, "stats").locator(".compare-figure-row").nth(2).locator(".js-plotly-plot")
    ranges = [means.nth(i).evaluate("gd => gd._fullLayout.yaxis.range") for i in range(2)]
    assert ranges[0] == ranges[1]


# Per graph of a row: its plot's drawn size, how far its title runs past its right edge, its captions' and its
# maps' boxes on the page.
ROW_LAYOUT = """row => [...row.querySelectorAll('.js-plotly-plot')].map(gd => {
    const box = gd.getBoundingClientRect(), xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
    const title = gd.querySelector('.gtitle'), rect = r => [r.left, r.top, r.right, r.bottom];
    const x = v => box.left + xa._offset + xa.l2p(v), y = v => box.top + ya._offset + ya.l2p(v);
    return {plot: [Math.round(xa._length), Math.round(ya._length)],
            title: title.getBoundingClientRect().right - box.right,
            captions: [...gd.querySelectorAll('.annotation-text')].map(t => rect(t.getBoundingClientRect())),
            maps: ((gd.layout.meta || {}).tiles || []).map(([top, left, h, w]) =>
                [x(left - 0.5), Math.min(y(top - 0.5), y(top + h - 0.5)), x(left + w - 0.5),
                 Math.max(y(top - 0.5), y(top + h - 0.5))])};
})"""


def _overlap(a: list[float], b: list[float]) -> bool:
    return min(a[2], b[2]) - max(a[0], b[0]) > 0.5 and min(a[3], b[3]) - max(a[1], b[1]) > 0.5


@pytest.mark.parametrize("width, height", [(1600, 1000), (1280, 800)])
def test_every_column_of_compare_epochs_is_readable_at_the_usual_widths(viewer_url, logs, new_page, width, height):
    """The last epoch's column and the difference are as large as the others (their colour bars lie under the
    maps), titles are whole and channel captions cover neither each other nor the maps."""
    page = new_page(_url(viewer_url, logs / "run", idx=3, tab=ids.TAB_COMPARE_EPOCHS), width, height)
    rows = [_block(page, name).locator(".compare-figure-row").first for name in ("features", "gradcam")]
    for row in rows:
        row.locator(".js-plotly-plot .main-svg").nth(2).wait_for()
        graphs = row.evaluate(ROW_LAYOUT)
        assert len(graphs) == 3 and all(graph["plot"] == graphs[0]["plot"] for graph in graphs), graphs
        assert all(graph["title"] <= 0 for graph in graphs), [graph["title"] for graph in graphs]
        for graph in graphs:
            captions = graph["captions"]
            assert not [(a, b) for i, a in enumerate(captions) for b in captions[i + 1:] + graph["maps"]
                        if _overlap(a, b)]


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
    image = page.locator(f"#{ids.DATAPOINT_PANEL} .section-inputs img")
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

    page.locator(f"#{ids.TABLE} .ag-row[row-id='{second}']").wait_for(state="attached")  # the rows are loaded
    page.keyboard.press("j")  # the table's next row, drawn in the same place (in view now)
    page.wait_for_selector(f"#{ids.DATAPOINT_PANEL} .datapoint-title:has-text('datapoint {second} ')")
    expected = load_datapoint(backend, run, epoch, second)["debug"]["stats"]["channel_means"]
    page.wait_for_function("([g, y]) => g._fullData && g._fullData[0].y.length === y.length "
                           "&& Array.from(g._fullData[0].y).every((v, i) => Math.abs(v - y[i]) < 1e-6)",
                           arg=[means.element_handle(), np.asarray(expected).tolist()])


def test_dropdown_options_never_lie_under_the_search_box(viewer_url, logs, new_page):
    page = new_page(_url(viewer_url, logs / COPIES[-1]))  # its option is the last: the list opens scrolled
    page.wait_for_selector(f"#{ids.TABLE_CAPTION}:has-text('epoch 1')")
    page.click(f"#{ids.RUN_SELECT}")
    page.locator(".dash-dropdown-search").wait_for()
    overlaps = page.evaluate("""() => {
        const search = document.querySelector('.dash-dropdown-search-container').getBoundingClientRect();
        const list = document.querySelector('.dash-dropdown-options').getBoundingClientRect();
        const shown = [...document.querySelectorAll('[role=option]')].map(o => o.getBoundingClientRect())
            .map(r => [Math.max(r.top, list.top), Math.min(r.bottom, list.bottom)]).filter(([t, b]) => b > t);
        return shown.filter(([top, bottom]) => top < search.bottom - 1 && bottom > search.top + 1).length; }""")
    assert overlaps == 0
    assert page.get_by_role("option", name=f"{COPIES[-1]} (trainer)").is_visible()
