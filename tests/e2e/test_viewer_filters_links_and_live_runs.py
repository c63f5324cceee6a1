"""The viewer in a real headless Chromium: panels never showing a datapoint other than the one asked for, a refresh that
runs no callback until the runs on disk change, the table's typed filters (its rows back after one matching nothing),
chips, column chooser and j / k, links and named views holding the whole view, runs followed while they train, and
what reads at a glance (percentiles, the cam's scale, the confusion matrix's colours). Each test failed before its fix.

One trained run, ``small`` (12 validation datapoints, debug outputs at every epoch 0..2), beside runs the
tests make for themselves.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import pytest

from analysis.epoch_table import EpochTable
from run_dir.saved_views import views_file
from runners.eval_viewer.address.ids import SAVE_VIEW, SAVED_VIEWS, VIEW_NAME, VIEW_NOTE
from runners.eval_viewer.compare_epochs.ids import COMPARE_EPOCHS_PANEL, COMPARE_EPOCHS_STATUS, TAB_COMPARE_EPOCHS
from runners.eval_viewer.controls import view as controls
from runners.eval_viewer.controls.ids import EPOCH_SELECT, FOLLOW_LATEST, MESSAGES, NEAREST_DEBUG_EPOCH, RUN_SELECT
from runners.eval_viewer.datapoint.ids import DATAPOINT_PANEL, DATAPOINT_STATUS, TAB_DATAPOINT
from runners.eval_viewer.scores.ids import SCORE_GRID
from runners.eval_viewer.shared.ids import SELECTED
from runners.eval_viewer.table.ids import (
    COLUMNS_PINNED,
    COLUMNS_SHOWN,
    FILTER_CHIPS,
    TABLE,
    TABLE_IDX_FILTER,
    WRONG_ONLY,
)
from tests.e2e.conftest import DEBUGGER, SLOW_WAIT_MS, serve_viewer
from tests.e2e.synthetic_runs import write_table_run
from tests.e2e.viewer_page import (
    cell,
    column,
    compare_first_row,
    filter_box,
    filter_column,
    open_row,
    pick,
    set_filter,
    wait_caption,
    wait_rows,
    wait_title,
)
from tests.runs import train, write_config

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300), pytest.mark.slow]

# What the panel shows at each frame the browser paints: its title where the title is on screen, else ''.
RECORD_FRAMES = """panel => {
    window.framesSeen = [];
    const record = () => {
        const title = document.querySelector(`#${panel} .datapoint-title`);
        window.framesSeen.push(title && title.offsetParent !== null ? title.innerText : '');
        if (window.framesSeen.length < 100000) { requestAnimationFrame(record); }
    };
    requestAnimationFrame(record);
}"""


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("small_runs")
    (root / "configs").mkdir()
    train(write_config(root / "configs" / "small.py", root / "logs" / "small", epochs=3, checkpoint_method="all",
                       val_size=12, extra=DEBUGGER))
    return root / "logs"


def test_compare_epochs_never_shows_the_previous_datapoint(viewer_url, new_page):
    """open A, Compare epochs, back, open B, Compare epochs again: it showed A until B was drawn."""
    page = new_page(viewer_url)
    order = compare_first_row(page, "12 datapoints")
    page.click(f"#{TAB_DATAPOINT}")
    open_row(page, 1)
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[1]} ")

    page.evaluate(RECORD_FRAMES, COMPARE_EPOCHS_PANEL)
    page.click(f"#{TAB_COMPARE_EPOCHS}")
    wait_title(page, COMPARE_EPOCHS_PANEL, f"datapoint {order[1]} ")
    seen = page.evaluate("window.framesSeen")
    assert not [title for title in seen if f"datapoint {order[0]} " in title], \
        f"Compare epochs showed datapoint {order[0]} while datapoint {order[1]} was asked for"
    assert page.locator(f"#{COMPARE_EPOCHS_STATUS}").inner_text() == ""


def test_every_panel_says_loading_until_it_shows_the_datapoint_asked_for(viewer_url, new_page):
    """a slow answer (delayed in the browser) leaves 'loading datapoint N …' in place, never the last one."""
    page = new_page("about:blank")
    page.add_init_script(SLOW_SERVER.replace("DELAY_MS", "1500"))
    page.goto(viewer_url)
    wait_caption(page, "12 datapoints")
    order = column(page, "idx")
    open_row(page, 0)
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[0]} ")
    open_row(page, 1)
    page.wait_for_selector(f"#{DATAPOINT_STATUS}:has-text('loading datapoint {order[1]} …')")
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[1]} ")
    assert page.locator(f"#{DATAPOINT_STATUS}").inner_text() == ""


def test_a_link_to_compare_epochs_draws_on_a_loaded_machine(logs, new_page, monkeypatch):
    """the page's refresh ran callbacks on a timer, and Dash holds back every callback downstream of one in
    flight (the comparison is, through the epoch list): on a loaded machine, where answers took longer than the
    refresh period, one was always in flight and the link drew nothing. Here the browser runs 4 times slower, every
    answer takes 2 s and the page refreshes twice a second."""
    monkeypatch.setattr(controls, "REFRESH_MS", 500)
    with serve_viewer([str(logs)]) as url:
        page = new_page("about:blank")
        page.add_init_script(SLOW_SERVER.replace("DELAY_MS", "2000"))
        page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": 4})
        page.goto(f"{url}?run={logs / 'small'}&epoch=epoch_2&idx=7&tab={TAB_COMPARE_EPOCHS}")
        page.wait_for_selector(f"#{COMPARE_EPOCHS_STATUS}:has-text('loading datapoint 7 …')")
        page.set_default_timeout(SLOW_WAIT_MS)
        wait_title(page, COMPARE_EPOCHS_PANEL, "datapoint 7 · logs/small")
        page.close()  # before the server stops


def test_the_page_runs_no_callback_until_the_runs_on_disk_change(logs, tmp_path, new_page, monkeypatch):
    """the refresh asks outside Dash's callbacks; a change on disk (a new run) still shows without a reload."""
    monkeypatch.setattr(controls, "REFRESH_MS", 300)
    folder = tmp_path / "logs"
    shutil.copytree(logs / "small", folder / "small")
    with serve_viewer([str(folder)]) as url:
        page = new_page(url)
        wait_caption(page, "12 datapoints")
        asked = []
        page.on("request", lambda request: asked.append(request.url) if "_dash-update-component" in request.url
                else None)
        with page.expect_request(lambda request: "_lantern/changes" in request.url):
            pass
        for _ in range(3):  # three more questions, answered 'nothing changed'
            with page.expect_response(lambda response: "_lantern/changes" in response.url):
                pass
        assert asked == [], "the page ran callbacks though nothing changed on disk"
        shutil.copytree(logs / "small", folder / "copy")
        page.click(f"#{RUN_SELECT}")
        page.get_by_role("option", name="logs/copy (trainer)", exact=True).wait_for()
        page.keyboard.press("Escape")
        page.close()  # before the server stops


def test_debugger_summary_columns_show_their_values(viewer_url, logs, new_page):
    """AG Grid read the '.' of 'gradcam.target_score' as a nested path: every summary column said n/a."""
    page = new_page(viewer_url)
    wait_caption(page, "12 datapoints")
    first = int(column(page, "idx")[0])
    page.evaluate(f"dash_ag_grid.getApi('{TABLE}').ensureColumnVisible('gradcam.target_score')")
    shown = cell(page, 0, "gradcam.target_score")
    expected = EpochTable(str(logs / "small" / "epoch_2" / "epoch_table.parquet")).page(
        where=[("idx", "=", first)])[0]["gradcam.target_score"]
    assert shown != "n/a" and float(shown) == pytest.approx(expected, rel=1e-3)


def test_j_right_after_clicking_a_row_opens_the_next_one(viewer_url, new_page):
    """a click on a row left the focus where it was, in the table's filter box just typed in: j was typed
    into the filter."""
    page = new_page(viewer_url)
    wait_caption(page, "12 datapoints")
    filter_box(page, "label").click()
    filter_box(page, "label").press_sequentially("c")  # circle and cross
    wait_caption(page, "of 12 datapoints match")
    order = column(page, "idx")
    assert len(order) >= 3
    open_row(page, 1)
    for key, row in (("j", 2), ("k", 1)):  # each right after the click, or the key before it
        wait_title(page, DATAPOINT_PANEL, f"datapoint {order[3 - row]} ")
        page.keyboard.press(key)
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[1]} ")
    assert filter_box(page, "label").input_value() == "c"


@pytest.fixture(scope="module")
def odd_logs(tmp_path_factory):
    """A run whose label column is float with NaN (datapoints 2 and 5 have none, named 'unlabelled' as another
    writer could) and whose loss is missing for datapoints 1, 4 and 7."""
    folder = tmp_path_factory.mktemp("odd") / "logs"
    label = np.array([0, 1, np.nan, 3, 4, np.nan, 0, 1, 2, 3], dtype=np.float64)
    prediction = np.array([0, 2, 2, 3, 1, 5, 0, 1, 4, 3])
    loss = np.array([0.1, np.nan, 0.3, 0.4, np.nan, 0.6, 0.7, np.nan, 0.9, 1.0])
    write_table_run(str(folder), "odd", label, prediction, loss)
    return folder


def test_blank_and_not_blank_filter_the_missing_values(odd_logs, new_page):
    """'Blank' / 'Not blank' on a number filter returned every row, and the caption said no filter."""
    with serve_viewer([str(odd_logs)]) as url:
        page = new_page(url)
        wait_caption(page, "10 datapoints")
        set_filter(page, "cross_entropy", "blank")
        wait_caption(page, "3 of 10 datapoints match")
        assert sorted(column(page, "idx"), key=int) == ["1", "4", "7"]
        set_filter(page, "cross_entropy", "notBlank")
        wait_caption(page, "7 of 10 datapoints match")
        assert "1" not in column(page, "idx")
        page.close()  # before the server stops


def test_a_label_column_of_floats_with_nan_opens_and_names_its_classes(odd_logs, new_page):
    """``int(nan)`` in the class names broke the whole epoch."""
    with serve_viewer([str(odd_logs)]) as url:
        page = new_page(f"{url}?idx=3")
        wait_caption(page, "10 datapoints")
        assert "cross (3)" in column(page, "label")
        wait_title(page, DATAPOINT_PANEL, "datapoint 3 ")
        assert "label cross (3)" in page.locator(f"#{DATAPOINT_PANEL} .badges").inner_text()
        page.close()  # before the server stops


def test_a_superscript_digit_in_the_address_or_a_filter_box_gives_a_message(viewer_url, new_page):
    """``'²'.isdigit()`` is true and ``int('²')`` fails: both gave HTTP 500."""
    page = new_page(f"{viewer_url}?idx=²")
    page.wait_for_selector(f"#{MESSAGES} :has-text(\"idx='²' is not a dataset index\")")
    wait_caption(page, "12 datapoints")
    filter_column(page, "label", "²")
    wait_caption(page, "no datapoint of 12 matches")


def test_a_click_on_the_table_while_a_narrowing_loads_never_opens_the_previous_one(viewer_url, logs, new_page):
    """after a click on a finding the table showed the previous finding's rows until its answers came (the
    score grid a round trip earlier); a click on the top row in that window opened a datapoint of the previous
    finding. The answers are slowed so that window lasts seconds; the table says it is loading instead."""
    page = new_page("about:blank")
    page.add_init_script(SLOW_SERVER.replace("DELAY_MS", "1500"))
    page.goto(viewer_url)
    wait_caption(page, "12 datapoints")
    narrow = f"""idx => window.dash_clientside.set_props('{TABLE_IDX_FILTER}',
        {{data: {{run: {json.dumps(str(logs / 'small'))}, epoch: 'epoch_2', idx: idx}}}})"""
    page.evaluate(narrow, [0, 1, 2])
    wait_caption(page, "3 of 12 datapoints match")
    previous = column(page, "idx")
    page.evaluate(narrow, [9, 10, 11])  # as a finding's click does
    page.locator(f"#{TABLE} .ag-center-cols-container .ag-row[row-index='0'] [col-id='idx']").click(force=True)
    page.keyboard.press("j")
    wait_caption(page, "3 of 12 datapoints match")
    page.wait_for_function(f"() => (document.getElementById('{SCORE_GRID}').scoreGrid || {{}}).idx.includes(11)")
    page.locator(f"#{TABLE} .ag-row[row-id='11']").wait_for()
    assert sorted(column(page, "idx"), key=int) == ["9", "10", "11"]
    assert page.evaluate(f"window.dash_component_api.getLayout('{SELECTED}').props.data") is None, \
        f"a click on the previous narrowing's rows opened a datapoint (its top row was {previous[0]})"
    page.keyboard.press("j")  # now the table is current: the keys step from its first row
    wait_title(page, DATAPOINT_PANEL, f"datapoint {column(page, 'idx')[0]} ")


def test_filters_people_type_wrong_only_and_chips(viewer_url, logs, new_page):
    """'> 2', '0.2..0.6', '!= ring', 'ring, circle' in the boxes (numeric boxes were <input type=number>, so
    none could be typed); a one-click "wrong only"; chips listing the active filters, each removable."""
    table = EpochTable(str(logs / "small" / "epoch_2" / "epoch_table.parquet"))
    values = table.values(["idx", "cross_entropy", "label", "prediction", "label_name"])
    page = new_page(viewer_url)
    wait_caption(page, "12 datapoints")
    losses = sorted(values["cross_entropy"])
    low, high = (float(f"{losses[i]:.6f}") for i in (2, 8))
    filter_column(page, "cross_entropy", f"{low:.6f}..{high:.6f}")
    expected = {int(i) for i, v in zip(values["idx"], values["cross_entropy"]) if low <= v <= high}
    wait_caption(page, f"{len(expected)} of 12 datapoints match")
    wait_rows(page, expected)
    assert page.locator(f"#{FILTER_CHIPS} .filter-chip").all_inner_texts() == \
        [f"cross_entropy: {low:.6f}..{high:.6f} ×"]
    page.locator(f"#{FILTER_CHIPS} .filter-chip").click()  # removed by its chip
    wait_caption(page, "epoch 2: 12 datapoints")
    assert filter_box(page, "cross_entropy").input_value() == ""

    filter_column(page, "label", "!= ring")
    rings = sum(name == "ring" for name in values["label_name"])
    wait_caption(page, f"{12 - rings} of 12 datapoints match")
    filter_column(page, "label", "ring, circle")
    both = sum(name in ("ring", "circle") for name in values["label_name"])
    wait_caption(page, f"{both} of 12 datapoints match")
    filter_column(page, "label", "")
    above = float(f"{losses[5]:.6f}")
    filter_column(page, "cross_entropy", f"> {above:.6f}")
    wait_caption(page, f"{sum(v > above for v in losses)} of 12 datapoints match")

    page.locator(f"#{WRONG_ONLY} input").check()
    wrong = {int(i) for i, v, a, b in zip(values["idx"], values["cross_entropy"], values["label"],
                                          values["prediction"]) if v > above and a != b}
    wait_caption(page, f"{len(wrong)} of 12 datapoints match the filters (wrong only)")
    wait_rows(page, wrong)
    assert len(page.locator(f"#{FILTER_CHIPS} .filter-chip").all()) == 2
    page.locator(f"#{FILTER_CHIPS} .filter-chip", has_text="wrong only").click()
    wait_caption(page, f"{sum(v > above for v in losses)} of 12 datapoints match the filters,")
    assert not page.locator(f"#{WRONG_ONLY} input").is_checked()

    filter_column(page, "cross_entropy", "> lots")
    wait_caption(page, "is not a number")


def test_the_column_chooser_hides_and_pins_columns(viewer_url, new_page):
    """5 of about 50 columns show at 1500 px; a chosen column can be pinned to the table's left."""
    page = new_page(viewer_url)
    wait_caption(page, "12 datapoints")
    page.locator("summary", has_text="Columns").click()
    page.click(f"#{COLUMNS_PINNED}")
    page.locator(".dash-dropdown-content").get_by_role("option", name="gradcam.entropy", exact=True).click()
    page.keyboard.press("Escape")
    pinned = f"#{TABLE} .ag-pinned-left-header .ag-header-cell-sortable[col-id='gradcam.entropy']"
    page.locator(pinned).wait_for()
    page.locator(f"#{COLUMNS_SHOWN} label", has_text="true_class_confidence").click()
    page.locator(f"#{TABLE} .ag-header-cell[col-id='true_class_confidence']").wait_for(state="detached")


def test_a_link_holds_the_whole_view_filters_narrowing_and_comparisons(logs, tmp_path, new_page):
    """a link to "wrong rings" opened all rows: filters, a Failures narrowing, the comparisons' choices and
    the columns were not in the address."""
    run = logs / "small"
    view = urlencode([("run", str(run)), ("epoch", "epoch_2"), ("idx", 7), ("tab", TAB_COMPARE_EPOCHS),
                      ("sort", "idx"), ("f.cross_entropy", "> 0.5"), ("wrong", "1"),
                      ("narrow", "confusion:ring|square"), ("cmp_epochs", "epoch_0"), ("cmp_epochs", "epoch_2"),
                      ("pin", "gradcam.entropy"), ("hide", "true_class_confidence")])
    with serve_viewer([str(logs)], views_dir=str(tmp_path / "views")) as url:
        page = new_page(f"{url}/?{view}")
        caption = wait_caption(page, "2 of 12 datapoints match the filters (narrowed to a chosen set of datapoints)")
        assert "(wrong only), sorted by idx (lowest first)" in caption
        assert column(page, "idx") == ["1", "7"]  # labelled ring, predicted square
        chips = page.locator(f"#{FILTER_CHIPS} .filter-chip").all_inner_texts()
        assert chips == ["cross_entropy: > 0.5 ×", "wrong only (label ≠ prediction) ×",
                         "finding: label ring, predicted square ×"]
        assert filter_box(page, "cross_entropy").input_value() == "> 0.5"
        wait_title(page, COMPARE_EPOCHS_PANEL, "datapoint 7 ")
        headings = page.locator(f"#{COMPARE_EPOCHS_PANEL} .compare-headings h5").all_inner_texts()
        assert [h for h in headings if h.startswith("epoch")] == ["epoch 0", "epoch 2"]
        page.locator(f"#{TABLE} .ag-pinned-left-header .ag-header-cell-sortable[col-id='gradcam.entropy']") \
            .wait_for()
        assert page.locator(f"#{TABLE} .ag-header-cell[col-id='true_class_confidence']").count() == 0

        page.locator(f"#{FILTER_CHIPS} .filter-chip", has_text="cross_entropy").click()
        wait_caption(page, "2 of 12 datapoints match")
        page.wait_for_function("() => !window.location.search.includes('f.cross_entropy')")
        again = new_page(page.url)  # the address as it is now: the same view
        wait_caption(again, "2 of 12 datapoints match the filters (narrowed to a chosen set of datapoints)")
        assert again.locator(f"#{FILTER_CHIPS} .filter-chip").count() == 2
        page.close()
        again.close()  # before the server stops


def test_named_views_are_saved_per_run_in_the_viewer_s_own_file(logs, tmp_path, new_page):
    """named saved views; a name never becomes a path, and nothing is written into a run folder."""
    views_dir = tmp_path / "config" / "views"
    run = logs / "small"
    before = sorted(p.name for p in run.rglob("*"))
    with serve_viewer([str(logs)], views_dir=str(views_dir)) as url:
        page = new_page(f"{url}/?run={run}&epoch=epoch_2")
        wait_caption(page, "12 datapoints")
        filter_column(page, "label", "ring")
        wait_caption(page, "of 12 datapoints match")
        for name in ("rings", "../../../etc/passwd", "<b>bold</b>"):
            page.fill(f"#{VIEW_NAME}", name)
            page.click(f"#{SAVE_VIEW}")
            page.wait_for_function("([note, text]) => document.getElementById(note).innerText === text",
                                   arg=[VIEW_NOTE, f"saved as '{name}'"])

        fresh = new_page(f"{url}/?run={run}&epoch=epoch_2")
        wait_caption(fresh, "epoch 2: 12 datapoints")
        fresh.click(f"#{SAVED_VIEWS}")
        assert fresh.locator(".dash-dropdown-content [role=option]").all_inner_texts() == \
            sorted(["rings", "../../../etc/passwd", "<b>bold</b>"])
        fresh.locator(".dash-dropdown-content").get_by_role("option", name="rings", exact=True).click()
        wait_caption(fresh, "of 12 datapoints match")
        assert filter_box(fresh, "label").input_value() == "ring"
        page.close()
        fresh.close()  # before the server stops
    stored = json.loads(Path(views_file(str(views_dir), str(run))).read_text())
    assert stored["run"] == str(run) and len(stored["views"]) == 3
    assert sorted(p.name for p in run.rglob("*")) == before
    assert sorted(p.name for p in views_dir.iterdir()) == sorted([".lock", Path(views_file("", str(run))).name])


def _rewrite_progress(run, completed: int) -> None:
    progress = json.loads((run / "progress.json").read_text())
    (run / "progress.json").write_text(json.dumps({**progress, "completed_epochs": completed}))


def test_live_runs_follow_the_latest_epoch_and_show_new_debug_outputs_without_a_reload(logs, tmp_path, new_page,
                                                                                     monkeypatch):
    """a "follow the latest epoch" switch; the "→ epoch N has debug outputs" button comes without a reload;
    on start the viewer opens the most recent finished run, not a half-written one."""
    monkeypatch.setattr(controls, "REFRESH_MS", 300)
    folder = tmp_path / "logs"
    shutil.copytree(logs / "small", folder / "finished")
    live = folder / "live"
    shutil.copytree(logs / "small", live)
    for epoch in ("epoch_1", "epoch_2"):
        shutil.rmtree(live / epoch)
    shutil.rmtree(live / "epoch_0" / "debugger")
    _rewrite_progress(live, 1)  # written last: the most recent run, but half-written
    with serve_viewer([str(folder)], views_dir=str(tmp_path / "views")) as url:
        page = new_page(url)
        wait_caption(page, "epoch 2: 12 datapoints")
        assert page.locator(f"#{RUN_SELECT}").inner_text().strip() == "logs/finished (trainer)"

        page.goto(f"{url}/?run={live}&epoch=epoch_0")
        wait_caption(page, "epoch 0: 12 datapoints")
        assert page.locator(f"#{NEAREST_DEBUG_EPOCH}").count() == 0  # no epoch has debug outputs yet
        page.locator(f"#{FOLLOW_LATEST} input").check()
        shutil.copytree(logs / "small" / "epoch_1", live / "epoch_1")  # the run writes epoch 1, with debug outputs
        _rewrite_progress(live, 2)
        wait_caption(page, "epoch 1: 12 datapoints")  # followed
        assert page.locator(f"#{EPOCH_SELECT}").inner_text().strip() == "epoch 1 · debug"
        page.locator(f"#{FOLLOW_LATEST} input").uncheck()
        pick(page, EPOCH_SELECT, "epoch 0")
        wait_caption(page, "epoch 0: 12 datapoints")
        page.locator(f"#{NEAREST_DEBUG_EPOCH}").wait_for()
        shutil.rmtree(live / "epoch_1" / "debugger")  # gone again: the button goes too
        page.locator(f"#{NEAREST_DEBUG_EPOCH}").wait_for(state="detached")
        shutil.copytree(logs / "small" / "epoch_2", live / "epoch_2")  # not followed: the epoch stays
        page.locator(f"#{NEAREST_DEBUG_EPOCH}:has-text('epoch 2 has debug outputs')").wait_for()
        assert page.locator(f"#{EPOCH_SELECT}").inner_text().strip() == "epoch 0"
        page.close()  # before the server stops


def test_cosmetics_binary_percentiles_cam_scale_and_confusion_colours(viewer_url, logs, new_page):
    """no percentile badge on a 0/1 metric; Grad-CAM's 'raw max 0 / 0.368' explained, to 4 significant
    digits; the confusion matrix's colours span the errors, not the diagonal."""
    page = new_page(f"{viewer_url}?run={logs / 'small'}&epoch=epoch_2&idx=1")
    wait_title(page, DATAPOINT_PANEL, "datapoint 1 ")
    badges = page.locator(f"#{DATAPOINT_PANEL} .score-badge").all_inner_texts()
    assert [b for b in badges if b.startswith("accuracy")] == ["accuracy 0"]
    assert all(" · p" in b for b in badges if b.startswith("cross_entropy"))
    gradcam = page.locator(f"#{DATAPOINT_PANEL} .debugger-block", has=page.locator(".card-header",
                                                                                   has_text="gradcam"))
    title = gradcam.locator(".picture-figure figcaption").first.inner_text()  # drawn as a picture over the input
    assert "each map as a share of its maximum" in title and "raw max" not in title
    row = EpochTable(str(logs / "small" / "epoch_2" / "epoch_table.parquet")).page(where=[("idx", "=", 1)])[0]
    assert f"{row['gradcam.raw_max']:.4g}" in title

    page.click("#tab-failures")
    drawn = """() => [...document.querySelectorAll('#failures-confusion, #failures-confusion *')]
        .map(element => element.data).find(data => data && data.length && data[0].z)"""
    trace = page.wait_for_function(drawn, timeout=SLOW_WAIT_MS).json_value()[0]
    off_diagonal = [c for i, r in enumerate(trace["z"]) for j, c in enumerate(r) if i != j]
    assert trace["zmin"] == 0 and trace["zmax"] == max(off_diagonal)


# Every answer of the server's callbacks delayed in the browser, as on a machine under heavy load.
SLOW_SERVER = """
const send = window.fetch;
window.fetch = async function (url, options) {
    const answer = await send.apply(this, arguments);
    if (String(url).includes('_dash-update-component')) {
        await new Promise(resolve => setTimeout(resolve, DELAY_MS));
    }
    return answer;
};
"""


@pytest.fixture(scope="module")
def five_hundred(tmp_path_factory):
    """A 500-datapoint run whose loss spans 0..2 (so '> 100' matches none and '> 1' about half)."""
    folder = tmp_path_factory.mktemp("five_hundred") / "logs"
    rng = np.random.default_rng(5)
    label, prediction = rng.integers(0, 6, 500), rng.integers(0, 6, 500)
    write_table_run(str(folder), "five_hundred", label.astype(np.float64), prediction, rng.uniform(0, 2, 500))
    return folder


def test_the_table_shows_its_rows_after_a_filter_that_matched_none_or_could_not_be_read(five_hundred, new_page):
    """after '> 100' (no match) or 'abc' (unreadable), '> 1' left every row 'n/a' with no idx, clicks opened
    nothing, and Clear filters did not bring the rows back: the grid's answer after an empty one was dropped."""
    loss = EpochTable(str(five_hundred / "five_hundred" / "epoch_0" / "epoch_table.parquet")).values(
        ["idx", "cross_entropy"])
    above = {int(i) for i, v in zip(loss["idx"], loss["cross_entropy"]) if v > 1}
    with serve_viewer([str(five_hundred)]) as url:
        page = new_page(url)
        wait_caption(page, "500 datapoints")
        for dead_end, said in (("> 100", "no datapoint of 500 matches"), ("abc", "is not a number"),
                               ("> 100", "no datapoint of 500 matches")):
            filter_column(page, "cross_entropy", dead_end)
            wait_caption(page, said)
            filter_column(page, "cross_entropy", "> 1")
            wait_caption(page, f"{len(above)} of 500 datapoints match")
            wait_rows(page, above)
            assert column(page, "idx")[0] != ""
            filter_column(page, "cross_entropy", dead_end)
            wait_caption(page, said)
            page.click("#table-clear-filters")
            wait_caption(page, "epoch 0: 500 datapoints")
            page.wait_for_function(f"() => dash_ag_grid.getApi('{TABLE}').getDisplayedRowAtIndex(0).data")
            assert column(page, "idx")[0] != ""
        idx = open_row(page, 0)
        wait_title(page, DATAPOINT_PANEL, f"datapoint {idx} ")
        page.close()  # before the server stops
