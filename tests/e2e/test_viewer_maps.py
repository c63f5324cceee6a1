"""The Embeddings tab, tags and the Runs tab in a real headless Chromium over three small trained runs (a captured
layer's output, the training monitor on, three learning rates): the map computed once and drawn, a box drawn on it
narrowing the table to exactly the points inside (and a link holding that), a click opening a point, More like this
listing the nearest neighbours of a brute-force search; a tag given from the keyboard, shown and filtered as a column,
kept in the run folder and in the link; the three runs' curves overlaid as their files hold them, their config
differences sorted, a click opening a run."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, quote, urlsplit

import numpy as np
import pyarrow.parquet as pq
import pytest

from run_dir import RunDir
from run_dir.embedding_file import embedding_path, read_embedding
from run_dir.findings_file import outputs_signature
from run_dir.names import EPOCH_TABLE_FILE, MONITOR_FILE
from run_dir.tags_file import read_tags
from run_dir.training_log import read_training_log
from runners.eval_viewer.controls.ids import RUN_SELECT
from runners.eval_viewer.embeddings.ids import (
    EMBEDDING_COLOUR,
    EMBEDDING_MAP,
    EMBEDDING_MORE,
    EMBEDDING_NEIGHBOURS,
    EMBEDDING_OPEN,
    TAB_EMBEDDINGS,
)
from runners.eval_viewer.export.report import export_report
from runners.eval_viewer.many_runs.ids import RUNS_CURVES, RUNS_TABLE, TAB_RUNS
from runners.eval_viewer.shared.ids import SELECTED
from runners.eval_viewer.table.ids import FILTER_CHIPS, TABLE_CAPTION
from runners.eval_viewer.tags.ids import TAG_CHIPS, TAG_NOTE
from tests.e2e.conftest import SLOW_WAIT_MS, expect, serve_viewer
from tests.e2e.viewer_page import column, filter_column, open_row, pick, wait_caption, wait_rows, wait_settled
from tests.runs import one_thread, train, write_config

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

RATES = {"slow": 0.01, "middle": 0.05, "fast": 0.2}
CAPTURED = """
from debuggers.layer_output_debugger import LayerOutputDebugger
config["debugger"] = {"class": SequentialDebugger, "args": {"page_size_mb": 4, "debuggers_config": [
    {"name": "features",
     "debugger_config": {"class": LayerOutputDebugger, "args": {"layer_name": "backbone.layer3"}}}]}}
config["training_monitor"] = {"every_n_steps": 1}
config["optimizer"]["args"]["lr"] = {lr}
"""
SPACE = "debugger:features"
PLOT = f"#{EMBEDDING_MAP} .js-plotly-plot"
# The points drawn: each trace's idx (its customdata) but the two marks' (the last two traces).
DRAWN = f"""() => {{ const gd = document.querySelector('{PLOT}');
    return gd && gd._fullData
        ? gd._fullData.slice(0, -2).map(t => [t.name, Array.from(t.customdata || [])]) : null; }}"""
# A point with no other within 8 px, where the page draws it: (x, y, idx).
LONE_POINT = f"""() => {{ const gd = document.querySelector('{PLOT}'), box = gd.querySelector('.nsewdrag')
    .getBoundingClientRect(), xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
    const points = gd._fullData.slice(0, -2).flatMap(t => Array.from(t.x).map((x, i) =>
        [box.left + xa.l2p(x), box.top + ya.l2p(t.y[i]), Number(t.customdata[i])]));
    return points.find(([x, y]) => x > box.left + 20 && x < box.right - 20 && y > box.top + 20 && y < box.bottom - 20
        && points.every(([u, v, i]) => (u === x && v === y) || Math.hypot(u - x, v - y) > 8)); }}"""
MARKED = f"() => Array.from(document.querySelector('{PLOT}')._fullData.slice(-1)[0].customdata || [])"
SELECTED_IDX = f"() => window.dash_component_api.getLayout('{SELECTED}').props.data"


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("maps")
    (root / "configs").mkdir()
    with one_thread():
        for name, lr in RATES.items():
            train(write_config(root / "configs" / f"{name}.py", root / "logs" / name, epochs=2, train_size=32,
                               val_size=40, extra=CAPTURED.replace("{lr}", repr(lr))))
    return root / "logs"


@pytest.fixture(scope="module")
def viewer_url(logs):
    with serve_viewer([str(logs)], embedding_method="pca") as url:
        yield url


def open_map(new_page, url: str, run: str, address: str = ""):
    page = new_page(f"{url}/?run={quote(run)}&tab={TAB_EMBEDDINGS}{address}")
    page.wait_for_function(DRAWN.replace("return gd &&", "return gd && gd._fullData && gd._fullData.length > 2 &&"),
                           timeout=SLOW_WAIT_MS)  # computed once for the epoch first
    return page


def test_the_map_is_drawn_from_the_stored_projection_and_a_box_narrows_the_table_and_the_link_holds_it(
        new_page, viewer_url, logs):
    run = str(logs / "slow")
    page = open_map(new_page, viewer_url, run)
    epoch_dir = RunDir(run).epoch_dir()
    stored = read_embedding(embedding_path(epoch_dir, SPACE), SPACE, outputs_signature(epoch_dir))
    assert stored is not None, "the map was not stored in the epoch's folder"
    drawn = page.evaluate(DRAWN)
    assert sorted(i for _, idx in drawn for i in idx) == stored.idx.tolist()
    assert {name.split(" (")[0] for name, _ in drawn} == {"passed", "failed"}

    pick(page, EMBEDDING_COLOUR, "label")  # coloured by label: each category's points are those of that label
    page.wait_for_function(f"() => ({DRAWN})().every(([name]) => !name.startsWith('passed'))")
    table = pq.read_table(f"{epoch_dir}/{EPOCH_TABLE_FILE}", columns=["idx", "label_name"]).to_pydict()
    labels = dict(zip(table["idx"], table["label_name"]))
    for name, idx in page.evaluate(DRAWN):
        assert {labels[i] for i in idx} == {name.split(" (")[0]}, name

    box = page.locator(f"{PLOT} .nsewdrag").first.bounding_box()
    page.click(f"{PLOT} .modebar-btn[data-val='select']")  # Box Select, as a user picks it
    page.mouse.move(box["x"] + box["width"] * 0.2, box["y"] + box["height"] * 0.2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] * 0.7, steps=8)
    page.mouse.up()
    wait_caption(page, "narrowed to a chosen set")
    narrow = parse_qs(urlsplit(page.url).query)["narrow"][0]
    x0, x1, y0, y1 = (float(v) for v in narrow.rpartition("|box:")[2].split(","))
    x, y = stored.xy[:, 0], stored.xy[:, 1]
    inside = set(stored.idx[(x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)].tolist())
    assert 0 < len(inside) < len(stored.idx)
    wait_rows(page, inside)
    selected_by_plotly = page.evaluate(f"""() => document.querySelector('{PLOT}')._fullData.slice(0, -2).flatMap(t =>
        (t.selectedpoints || []).map(i => Number(t.customdata[i])))""")
    assert set(selected_by_plotly) == inside  # what the user saw selected is what the table shows
    assert "map:" in page.locator(f"#{FILTER_CHIPS}").inner_text()

    linked = new_page(page.url)  # the link holds the selection
    wait_caption(linked, "narrowed to a chosen set")
    wait_rows(linked, inside)


@pytest.mark.slow
def test_a_click_opens_a_point_and_more_like_this_lists_its_nearest_neighbours(new_page, viewer_url, logs):
    run = str(logs / "middle")
    page = open_map(new_page, viewer_url, run)
    x, y, idx = page.evaluate(LONE_POINT)
    page.mouse.click(x, y)
    page.wait_for_function(f"() => ({SELECTED_IDX})() === {idx}")
    expect(page.locator(f"#{EMBEDDING_OPEN}")).to_contain_text(f"datapoint {idx}")
    page.wait_for_function(f"() => JSON.stringify(({MARKED})()) === '[{idx}]'")  # the star on it

    page.click(f"#{EMBEDDING_MORE}")
    page.wait_for_selector(f"#{EMBEDDING_NEIGHBOURS} .embedding-neighbour")
    epoch_dir = RunDir(run).epoch_dir()
    stored = read_embedding(embedding_path(epoch_dir, SPACE), SPACE, outputs_signature(epoch_dir))
    row = int(np.flatnonzero(stored.idx == idx)[0])
    distances = np.linalg.norm(stored.components.astype(np.float64) - stored.components[row], axis=1)
    distances[row] = np.inf
    nearest = stored.idx[np.lexsort((stored.idx, distances))[:10]].tolist()
    listed = [int(text.split()[1]) for text in page.locator(
        f"#{EMBEDDING_NEIGHBOURS} .embedding-neighbour strong").all_inner_texts()]
    assert listed == nearest
    page.locator(f"#{EMBEDDING_NEIGHBOURS} .embedding-neighbour").nth(2).click()
    page.wait_for_function(f"() => ({SELECTED_IDX})() === {nearest[2]}")
    page.wait_for_function(f"() => JSON.stringify(({MARKED})()) === '[{nearest[2]}]'")


def test_a_tag_given_from_the_keyboard_is_a_column_that_filters_kept_in_the_run_the_link_and_the_export(
        new_page, viewer_url, logs, tmp_path):
    run = str(logs / "fast")
    page = new_page(f"{viewer_url}/?run={quote(run)}")
    wait_caption(page, "epoch 1: 40 datapoints")
    first = int(open_row(page, 0))
    page.wait_for_function(f"() => ({SELECTED_IDX})() === {first}")
    page.keyboard.press("t")  # the tag box, the key not typed into it
    page.keyboard.type("odd one")
    page.keyboard.press("Enter")
    expect(page.locator(f"#{TAG_CHIPS} .tag-chip.carried")).to_have_text("1·odd one")
    page.keyboard.press("j")  # the next row opens; its chip is not filled
    page.wait_for_function(f"() => ({SELECTED_IDX})() !== {first}")
    second = page.evaluate(SELECTED_IDX)
    expect(page.locator(f"#{TAG_CHIPS} .tag-chip:not(.carried)")).to_have_text("1·odd one")
    page.keyboard.press("1")  # the chip's key: the tag given to this one too
    expect(page.locator(f"#{TAG_NOTE}")).to_have_text(f"datapoint {second} tagged 'odd one'")
    assert read_tags(run) == {"odd one": sorted([first, second])}

    filter_column(page, "tags", "odd one")
    wait_rows(page, {first, second})
    assert set(column(page, "tags")) == {"odd one"}
    assert parse_qs(urlsplit(page.url).query)["f.tags"] == ["odd one"]
    linked = new_page(page.url)
    wait_caption(linked, "2 of 40")
    wait_rows(linked, {first, second})

    filter_column(page, "tags", "blank")  # the untagged ones
    wait_caption(page, "38 of 40")

    coloured = open_map(new_page, viewer_url, run, f"&map_colour={quote('tag:odd one')}")  # the map by the tag
    drawn = {name: sorted(idx) for name, idx in coloured.evaluate(DRAWN)}
    assert drawn["tagged odd one (2)"] == sorted([first, second])

    report = open(export_report(run, [first, second, 0 if 0 not in (first, second) else 1],
                                str(tmp_path / "report.html"))).read()
    assert report.count("odd one") == 4  # the two tagged ones, in the report's table and in their own sections


def test_three_runs_overlaid_with_their_config_differences_sorted_and_a_click_opens_one(new_page, viewer_url, logs):
    runs = {name: str(logs / name) for name in RATES}
    address = "".join(f"&runs={quote(path)}" for path in runs.values())
    page = new_page(f"{viewer_url}/?run={quote(runs['slow'])}&tab={TAB_RUNS}{address}")
    curves = f"#{RUNS_CURVES} .js-plotly-plot"
    page.wait_for_function(f"() => document.querySelector('{curves}') && "
                           f"document.querySelector('{curves}')._fullData.length >= 9")
    traces = page.evaluate(f"""() => document.querySelector('{curves}')._fullData.map(t =>
        [t.name, t.xaxis + t.yaxis, Array.from(t.x).map(Number), Array.from(t.y).map(Number)])""")
    panels = page.evaluate(f"() => document.querySelector('{curves}').layout.annotations.map(a => a.text)")
    assert panels[:2] == ["training loss", "learning rate"] and "validation cross_entropy" in panels
    by_panel = {}
    for name, axes, x, y in traces:
        by_panel.setdefault(axes, {})[name.split("/")[-1]] = (x, y)
    loss_axes, lr_axes = "xy", "x2y2"
    ce_axes = f"x{panels.index('validation cross_entropy') + 1}y{panels.index('validation cross_entropy') + 1}"
    for name, path in runs.items():
        log = read_training_log(f"{path}/{MONITOR_FILE}")
        assert by_panel[loss_axes][name][0] == log.loss_steps.tolist()
        assert np.allclose(by_panel[loss_axes][name][1], log.losses)
        assert np.allclose(by_panel[lr_axes][name][1][0], RATES[name])
        means = [float(np.mean(pq.read_table(f"{path}/epoch_{e}/{EPOCH_TABLE_FILE}",
                                             columns=["cross_entropy"]).column(0).to_numpy())) for e in (0, 1)]
        assert by_panel[ce_axes][name] == ([0, 1], pytest.approx(means, rel=1e-5))

    rows = f"#{RUNS_TABLE} .ag-center-cols-container .ag-row"
    page.wait_for_selector(rows)
    lr_column = "optimizer.args.lr"
    header = page.locator(f"#{RUNS_TABLE} .ag-header-cell[col-id='{lr_column}']")
    header.click()
    header.click()  # sorted by it, highest first (the runs were chosen lowest first)
    highest_first = json.dumps([str(r) for r in sorted(RATES.values(), reverse=True)], separators=(",", ":"))
    page.wait_for_function(f"""() => {{ const cells = [...document.querySelectorAll("{rows}")]
        .sort((a, b) => a.getAttribute('row-index') - b.getAttribute('row-index'))
        .map(row => row.querySelector("[col-id='{lr_column}']").textContent);
        return JSON.stringify(cells) === '{highest_first}'; }}""")
    page.locator(f"#{RUNS_TABLE} .ag-pinned-left-cols-container [col-id='run']", has_text="fast").click()
    page.wait_for_function(f"() => window.dash_component_api.getLayout('{RUN_SELECT}').props.value === "
                           f"{json.dumps(runs['fast'])}")
    wait_caption(page, "epoch 1: 40 datapoints")
    wait_settled(page)
    assert page.locator(f"#{TABLE_CAPTION}").inner_text().startswith("epoch 1")
