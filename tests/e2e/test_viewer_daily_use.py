"""The viewer in a real headless Chromium over real runs: what misled a user before, and the daily loop.

Two trained runs: ``big`` (24 validation datapoints, debug outputs at epochs 1 and 2)
and ``small`` (12 datapoints, written last), plus the default example shrunk to a
few datapoints.
"""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from run_dir.budget import folder_bytes, remove_debug_outputs
from runners.config_file import load_config
from runners.eval_viewer.compare_epochs.ids import COMPARE_EPOCHS_PANEL, TAB_COMPARE_EPOCHS
from runners.eval_viewer.compare_runs.ids import COMPARE_RUN_SELECT, COMPARE_RUNS_PANEL, TAB_COMPARE_RUNS
from runners.eval_viewer.controls.ids import EPOCH_BADGES, EPOCH_SELECT, METRIC_SELECT, NEAREST_DEBUG_EPOCH, RUN_SELECT
from runners.eval_viewer.datapoint.ids import DATAPOINT_PANEL, DEBUGGER_PICK, TAB_DATAPOINT
from runners.eval_viewer.export.ids import EXPORT_BUTTON
from runners.eval_viewer.shared.ids import TABS
from runners.eval_viewer.table.ids import NAVIGATION_NOTE, PREV_BUTTON, TABLE, TABLE_CLEAR_FILTERS
from runners.trainers import BaseTrainer
from tests.e2e.conftest import DEBUGGER, expect, serve_viewer
from tests.e2e.viewer_page import (
    CUT_TEXT,
    column,
    compare_first_row,
    debug_figures,
    filter_box,
    filter_column,
    grid_cell,
    open_row,
    pick,
    wait_caption,
    wait_title,
)
from tests.runs import REPO_ROOT, train, write_config

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("daily")
    (root / "configs").mkdir()
    train(write_config(root / "configs" / "big.py", root / "logs" / "big", epochs=3, checkpoint_method=2,
                       extra=DEBUGGER))
    time.sleep(0.05)  # "most recent" is by modification time
    train(write_config(root / "configs" / "small.py", root / "logs" / "small", epochs=2, checkpoint_method="all",
                       val_size=12, extra=DEBUGGER))
    return root / "logs"


def _run_label(name: str) -> str:
    return f"{name} (trainer)"


def test_the_first_page_opens_the_most_recent_run_and_asks_for_a_datapoint_only(viewer_url, new_page):
    page = new_page(viewer_url)
    wait_caption(page, "epoch 1: 12 datapoints")
    assert page.locator(f"#{RUN_SELECT}").inner_text().strip() == _run_label("logs/small")
    panel = page.locator(f"#{DATAPOINT_PANEL}").inner_text()
    assert "Click a datapoint" in panel and "Pick a run" not in panel


def test_the_table_ranks_by_the_loss_so_wrong_datapoints_do_not_tie(viewer_url, logs, new_page):
    page = new_page(viewer_url)
    assert "sorted by cross_entropy (highest first)" in wait_caption(page, "epoch 1: 12 datapoints")
    scores = json.loads((logs / "small" / "epoch_1" / "validation_scores.json").read_text())["per_datapoint"]
    expected = sorted(range(12), key=lambda i: -scores["cross_entropy"][i])
    assert [int(i) for i in column(page, "idx")] == expected


def test_finding_a_datapoint_by_idx_says_when_nothing_matches_and_ends_with_the_run(viewer_url, new_page):
    page = new_page(viewer_url)
    wait_caption(page, "epoch 1: 12 datapoints")
    filter_column(page, "idx", "7")
    wait_caption(page, "1 of 12 datapoints match")
    assert column(page, "idx") == ["7"]

    filter_column(page, "idx", "423")
    assert "no datapoint of 12 matches" in wait_caption(page, "no datapoint")

    pick(page, RUN_SELECT, _run_label("logs/big"))
    assert "match" not in wait_caption(page, "epoch 2: 24 datapoints")
    assert filter_box(page, "idx").input_value() == ""
    assert len(column(page, "idx")) > 1


def test_a_datapoint_another_run_lacks_is_named_as_missing(viewer_url, logs, new_page):
    page = new_page(f"{viewer_url}?run={logs / 'big'}&epoch=epoch_2&idx=20")
    wait_title(page, DATAPOINT_PANEL, "datapoint 20 · logs/big · epoch 2")
    debug_figures(page).first.wait_for()

    pick(page, RUN_SELECT, _run_label("logs/small"))
    wait_title(page, DATAPOINT_PANEL, "datapoint 20 · logs/small")
    text = page.locator(f"#{DATAPOINT_PANEL}").inner_text()
    assert "logs/small has no datapoint with idx 20" in text
    assert "config changed" not in text and "written only in part" not in text

    pick(page, RUN_SELECT, _run_label("logs/big"))
    page.click(f"#{TAB_COMPARE_RUNS}")
    pick(page, COMPARE_RUN_SELECT, _run_label("logs/small"))
    # the tab first opens on its own choice of a second side: wait for the picked run's column
    expect(page.locator(f"#{COMPARE_RUNS_PANEL} .compare-column").nth(1)).to_have_text("logs/small · epoch 1")
    other = page.locator(f"#{COMPARE_RUNS_PANEL}").inner_text()
    assert "logs/small has no datapoint with idx 20" in other
    assert "config changed" not in other and "written only in part" not in other


@pytest.mark.slow
def test_the_default_example_compares_a_datapoint_across_several_epochs(tmp_path, new_page):
    config = load_config(os.path.join(REPO_ROOT, "configs", "examples", "cnn_trainer.py"))
    config["work_dir"] = str(tmp_path / "logs" / "cnn_trainer")
    config["train_dataset"]["args"]["num_datapoints"] = 32
    config["val_dataset"]["args"]["num_datapoints"] = 8
    BaseTrainer(config).run()
    with serve_viewer([str(tmp_path / "logs")]) as url:
        page = new_page(url)
        wait_caption(page, "8 datapoints")
        open_row(page, 0)
        page.click(f"#{TAB_COMPARE_EPOCHS}")
        page.wait_for_selector(f"#{COMPARE_EPOCHS_PANEL} .compare-column >> nth=1")
        headings = page.locator(f"#{COMPARE_EPOCHS_PANEL} .compare-column h5").all_inner_texts()
        assert len(headings) >= 2, f"Compare epochs shows {headings}: the example captures too few epochs"
        page.close()  # before the server stops: its timers would call a server that is gone


@pytest.mark.slow
def test_a_link_reopens_the_same_view_and_j_k_walk_the_table(viewer_url, new_page):
    page = new_page(viewer_url)
    wait_caption(page, "epoch 1: 12 datapoints")
    order = column(page, "idx")
    open_row(page, 0)
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[0]} ")
    page.keyboard.press("j")
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[1]} ")
    page.keyboard.press("j")
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[2]} ")
    page.click(f"#{PREV_BUTTON}")
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[1]} ")
    page.click(f"#{TAB_COMPARE_EPOCHS}")
    page.wait_for_selector(f"#{COMPARE_EPOCHS_PANEL} .compare-column")

    again = new_page(page.url)
    again.wait_for_selector(f"#{COMPARE_EPOCHS_PANEL} .compare-column")
    assert again.locator(f"#{TABS} .tab--selected").inner_text() == "Compare epochs"
    again.click(f"#{TAB_DATAPOINT}")
    wait_title(again, DATAPOINT_PANEL, f"datapoint {order[1]} · logs/small · epoch 1")


def test_export_writes_the_filtered_rows_as_a_report_with_readable_scores(viewer_url, logs, new_page):
    page = new_page(viewer_url)
    wait_caption(page, "epoch 1: 12 datapoints")
    filter_column(page, "cross_entropy", "123")
    wait_caption(page, "no datapoint")
    page.click(f"#{TABLE_CLEAR_FILTERS}")
    wait_caption(page, "epoch 1: 12 datapoints")
    filter_column(page, "idx", "5")
    wait_caption(page, "1 of 12 datapoints match")
    with page.expect_download() as download:
        page.click(f"#{EXPORT_BUTTON}")
    report = open(download.value.path(), encoding="utf-8").read()
    assert "<h2>Datapoint 5</h2>" in report and report.count("<h2>Datapoint ") == 1
    scores = json.loads((logs / "small" / "epoch_1" / "validation_scores.json").read_text())["per_datapoint"]
    assert f"<td>{scores['cross_entropy'][5]:.4g}</td>" in report
    assert "exported 1 datapoints" in wait_caption(page, "exported")


def test_an_epoch_whose_debug_outputs_the_budget_removed_says_so_and_leads_to_the_nearest(logs, tmp_path, new_page):
    run = tmp_path / "logs" / "budget"
    shutil.copytree(logs / "big", run)
    epoch_1 = run / "epoch_1"
    remove_debug_outputs(str(epoch_1), folder_bytes(str(epoch_1 / "debugger")), 0.001)  # as the trainer does
    with serve_viewer([str(tmp_path / "logs")]) as url:
        page = new_page(f"{url}?run={run}&epoch=epoch_1&idx=3")
        wait_title(page, DATAPOINT_PANEL, "datapoint 3 · logs/budget · epoch 1")
        outputs = page.locator(f"#{DATAPOINT_PANEL} .section-debug-outputs").inner_text()
        assert "epoch 1 were removed to stay under 0.001 GB" in outputs
        assert "debug outputs removed" in page.locator(f"#{EPOCH_BADGES}").inner_text()

        page.click(f"#{NEAREST_DEBUG_EPOCH}")  # epoch 0 has none either: epoch 2 is the nearest
        wait_title(page, DATAPOINT_PANEL, "datapoint 3 · logs/budget · epoch 2")
        debug_figures(page).first.wait_for()
        assert page.locator(f"#{EPOCH_SELECT}").inner_text().strip() == "epoch 2 · debug"
        page.close()  # before the server stops


def _sorted_columns(page) -> list[str]:
    """The columns whose header shows a sort arrow."""
    headers = page.locator(f"#{TABLE} .ag-header-cell[aria-sort='ascending'], "
                           f"#{TABLE} .ag-header-cell[aria-sort='descending']")
    return sorted(header.get_attribute("col-id") for header in headers.all())


def test_switching_the_metric_sorts_the_table_by_the_new_metric_alone(viewer_url, new_page):
    page = new_page(viewer_url)
    wait_caption(page, "sorted by cross_entropy (highest first)")
    assert _sorted_columns(page) == ["cross_entropy"]

    pick(page, METRIC_SELECT, "true_class_confidence")
    wait_caption(page, "sorted by true_class_confidence (lowest first)")
    assert _sorted_columns(page) == ["true_class_confidence"]

    page.click(f"#{TABLE} .ag-header-cell[col-id='idx'] .ag-header-cell-label")  # the user sorts by idx
    wait_caption(page, "sorted by idx (lowest first)")
    pick(page, METRIC_SELECT, "cross_entropy")
    wait_caption(page, "sorted by cross_entropy (highest first)")
    assert _sorted_columns(page) == ["cross_entropy"]


def test_j_steps_on_right_after_ticking_a_debugger(viewer_url, new_page):
    page = new_page(viewer_url)
    wait_caption(page, "epoch 1: 12 datapoints")
    order = column(page, "idx")
    open_row(page, 0)
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[0]} ")
    page.locator(f"#{DEBUGGER_PICK} input").first.click()  # the focus is now on the tick box
    page.keyboard.press("j")
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[1]} ")
    page.keyboard.press("k")
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[0]} ")


@pytest.mark.slow
def test_compare_epochs_names_the_datapoint_that_j_reached(viewer_url, new_page):
    page = new_page(viewer_url)
    order = compare_first_row(page, "epoch 1: 12 datapoints")
    page.keyboard.press("j")
    wait_title(page, COMPARE_EPOCHS_PANEL, f"datapoint {order[1]} · logs/small")


def test_the_metric_header_and_the_class_names_are_not_cut(viewer_url, new_page):
    page = new_page(viewer_url)
    wait_caption(page, "sorted by cross_entropy")
    assert column(page, "label") and all("(" in name for name in column(page, "prediction"))
    cells = f"#{TABLE} .ag-center-cols-container .ag-cell:is([col-id='label'], [col-id='prediction'])"
    assert page.locator(cells).count() >= 2 * 12 and page.evaluate(CUT_TEXT, cells) == []
    header = f"#{TABLE} .ag-header-cell[col-id='cross_entropy'] .ag-header-cell-text"
    assert page.locator(header).inner_text() == "cross_entropy"
    assert page.evaluate(CUT_TEXT, header) == []


def test_j_after_a_reload_steps_on_from_the_open_datapoint(viewer_url, new_page):
    page = new_page(viewer_url)
    wait_caption(page, "epoch 1: 12 datapoints")
    page.locator(f"#{TABLE} .ag-row[row-index='4']").wait_for()
    order = column(page, "idx")
    open_row(page, 3)
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[3]} ")
    page.reload()
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[3]} ")
    column(page, "idx")  # the table holds its rows again
    page.keyboard.press("j")
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[4]} ")
    page.keyboard.press("k")
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[3]} ")


def test_j_steps_after_a_choice_in_a_dropdown_and_an_open_dropdown_still_takes_typing(viewer_url, new_page):
    page = new_page(viewer_url)
    wait_caption(page, "epoch 1: 12 datapoints")
    pick(page, METRIC_SELECT, "true_class_confidence")  # the focus stays on the dropdown
    wait_caption(page, "sorted by true_class_confidence")
    order = column(page, "idx")
    page.keyboard.press("j")
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[0]} ")
    page.keyboard.press("j")  # it used to open the dropdown's search box, with "j" typed in
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[1]} ")

    page.click(f"#{METRIC_SELECT}")  # open: the keys are the dropdown's, in its search box too
    page.click(".dash-dropdown-search")
    page.keyboard.type("cross")
    options = page.locator(".dash-dropdown-content [role=option]")
    options.filter(has_text="accuracy").wait_for(state="detached")
    assert options.all_inner_texts() == ["cross_entropy"]
    page.keyboard.type("k")
    assert page.locator(".dash-dropdown-search").input_value() == "crossk"
    page.keyboard.press("Escape")
    page.wait_for_function(f"() => document.activeElement.id === '{METRIC_SELECT}'")  # closed, focus back on it
    page.keyboard.press("j")  # closed without a choice: the keys step again, from where they were
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[2]} ")


def _marked_rows(page) -> list[str]:
    """The idx of the table rows marked as the open datapoint's."""
    rows = page.locator(f"#{TABLE} .ag-center-cols-container .ag-row.open-datapoint")
    return [row.get_attribute("row-id") for row in rows.all()]


def test_the_open_datapoint_s_row_is_marked_however_it_was_opened_and_j_past_the_last_says_so(viewer_url, logs,
                                                                                              new_page):
    scores = json.loads((logs / "small" / "epoch_1" / "validation_scores.json").read_text())["per_datapoint"]
    order = [str(i) for i in sorted(range(12), key=lambda i: -scores["cross_entropy"][i])]  # the table's rows
    page = new_page(f"{viewer_url}?run={logs / 'small'}&epoch=epoch_1&idx={order[-2]}")  # a link, or a reload
    wait_caption(page, "epoch 1: 12 datapoints")
    page.locator(f"#{TABLE} .ag-row.open-datapoint").wait_for()
    assert _marked_rows(page) == [order[-2]]

    page.keyboard.press("j")
    wait_title(page, DATAPOINT_PANEL, f"datapoint {order[-1]} ")
    assert _marked_rows(page) == [order[-1]]
    page.keyboard.press("j")
    page.wait_for_selector(f"#{NAVIGATION_NOTE}:has-text('is the table\\'s last row')")
    assert f"datapoint {order[-1]} " in page.locator(f"#{DATAPOINT_PANEL} .datapoint-title").inner_text()

    page.mouse.click(*grid_cell(page, 0, 0))  # idx 0, from the score grid
    wait_title(page, DATAPOINT_PANEL, "datapoint 0 ")
    page.wait_for_function(f"() => document.querySelector('#{TABLE} .ag-row.open-datapoint')"
                           ".getAttribute('row-id') === '0'")
    assert _marked_rows(page) == ["0"] and page.locator(f"#{NAVIGATION_NOTE}").inner_text() == ""


@pytest.mark.slow
def test_a_reload_keeps_the_metric_and_the_table_s_sort(viewer_url, new_page):
    page = new_page(viewer_url)
    wait_caption(page, "epoch 1: 12 datapoints")
    pick(page, METRIC_SELECT, "true_class_confidence")
    wait_caption(page, "sorted by true_class_confidence")
    page.click(f"#{TABLE} .ag-header-cell[col-id='idx'] .ag-header-cell-label")  # the user sorts by idx
    wait_caption(page, "sorted by idx (lowest first)")
    open_row(page, 2)
    wait_title(page, DATAPOINT_PANEL, "datapoint 2 ")

    page.reload()
    wait_caption(page, "sorted by idx (lowest first)")
    assert page.locator(f"#{METRIC_SELECT}").inner_text().strip() == "true_class_confidence"
    assert column(page, "idx") == [str(i) for i in range(12)]
    page.keyboard.press("j")
    wait_title(page, DATAPOINT_PANEL, "datapoint 3 ")
    page.click(f"#{TABLE} .ag-header-cell[col-id='idx'] .ag-header-cell-label")
    wait_caption(page, "sorted by idx (highest first)")
    page.keyboard.press("j")  # from where datapoint 3 is now, not from the row it was opened at
    wait_title(page, DATAPOINT_PANEL, "datapoint 2 ")
    assert "sort=-idx" in page.url
