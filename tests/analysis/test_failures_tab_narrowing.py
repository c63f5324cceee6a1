"""The Failures tab over an afternoon of use, in a real headless Chromium on the small planted run: what the
analysis left out is said in the tab, a narrowing to a finding's datapoints ends where it stops being true
(Clear filters, another epoch, another run) and nowhere else (a training run writing a new epoch; a finding's answer
that comes back after a run switch), a reload on the tab reopens it, and the table names the classes of a
prediction column that holds NaN."""

from __future__ import annotations

import json
import os
import re
import shutil

import pyarrow.parquet as pq
import pytest

from analysis.failures import analyze
from run_dir.names import EPOCH_TABLE_FILE
from runners.eval_viewer.controls.ids import EPOCH_SELECT, RUN_SELECT
from runners.eval_viewer.datapoint.ids import TAB_DATAPOINT
from runners.eval_viewer.failures.ids import FAILURES_FILTER_NOTE, FAILURES_PANEL, TAB_FAILURES
from runners.eval_viewer.shared.ids import TABS
from runners.eval_viewer.table.ids import TABLE_CAPTION, TABLE_CLEAR_FILTERS, TABLE_IDX_FILTER, WRONG_ONLY
from tests.e2e.conftest import SLOW_WAIT_MS, expect, serve_viewer
from tests.e2e.viewer_page import column, pick, wait_caption, wait_settled
from tests.reliability.crafted_index import damage_debug_files

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def runs(planted_run, tmp_path_factory):
    """The planted run, and a copy whose last epoch's debug locations are truncated (the analysis skips them)."""
    work_dir = planted_run["work_dir"]
    damaged = str(tmp_path_factory.mktemp("damaged") / "damaged")
    shutil.copytree(work_dir, damaged)
    last = os.path.dirname(analyze(work_dir).table_path)
    damage_debug_files(os.path.join(damaged, os.path.basename(last), "debugger"), "locations_truncated")
    return work_dir, damaged, os.path.basename(last)


@pytest.fixture(scope="module")
def viewer_url(runs):
    with serve_viewer(list(runs[:2])) as url:
        yield url


@pytest.fixture(scope="module")
def unfinished(runs, tmp_path_factory):
    """The viewer over the planted run and two copies of it as it was before its last epoch was written: ``live``
    (a test's trainer writes it) and ``other``; yields the URL and the two copies."""
    work_dir, _, last = runs
    folder = tmp_path_factory.mktemp("unfinished")
    live, other = (without_last_epoch(work_dir, last, str(folder / name)) for name in ("live", "other"))
    with serve_viewer([work_dir, live, other]) as url:
        yield url, live, other


def open_run(new_page, url: str, run: str, tab: str = ""):
    page = new_page(f"{url}/?run={run}" + (f"&tab={tab}" if tab else ""))
    page.set_default_timeout(SLOW_WAIT_MS)  # the tab analyses an epoch on first show: slow on a busy machine
    wait_caption(page, "datapoints")
    return page


def slice_buttons(page):
    """The meta slices' buttons of the tab (its panel also holds the main confusions above them)."""
    return page.locator(f"""#{FAILURES_PANEL} [id*='"index":"slice-']""")


def narrow_to_first_slice(page, caption: str = "") -> int:
    """Show the Failures tab and click its first slice; the slice's size. ``caption``: what the table's caption then
    holds (default: the slice's size of the epoch's datapoints)."""
    page.click(f"#{TAB_FAILURES}")
    first = slice_buttons(page).first
    counted = re.compile(r"(\d[\d,]*)\s+datapoints")
    expect(first, SLOW_WAIT_MS).to_contain_text(counted)  # the count itself, not a placeholder that says datapoints
    text = first.inner_text()
    found = counted.search(text)
    assert found, f"the first finding's button says {text!r}, with no count of datapoints"
    size = int(found.group(1).replace(",", ""))
    first.click()
    wait_caption(page, caption or f"{size} of")
    assert "narrowed" in page.locator(f"#{TABLE_CAPTION}").inner_text()
    return size


def without_last_epoch(work_dir: str, last: str, copy: str) -> str:
    """A copy of the run as it was before its trainer wrote the ``last`` epoch."""
    shutil.copytree(work_dir, copy, ignore=lambda folder, _: [last] if folder == work_dir else [])
    return copy


def pick_epoch(page, number: int) -> None:
    page.click(f"#{EPOCH_SELECT}")
    page.get_by_role("option").filter(has_text=re.compile(rf"^epoch {number}\b")).click()


def assert_not_narrowed(page, total: int) -> None:
    wait_caption(page, f"{total} datapoints, sorted")
    assert "narrowed" not in page.locator(f"#{TABLE_CAPTION}").inner_text()
    assert page.locator(f"#{FAILURES_FILTER_NOTE}").inner_text() == ""


def test_the_tab_says_what_the_analysis_left_out(runs, viewer_url, new_page):
    _, damaged, _ = runs
    [note] = analyze(damaged).notes
    page = open_run(new_page, viewer_url, damaged)
    page.click(f"#{TAB_FAILURES}")
    # the findings stored after validation are of the debug outputs before the damage: the tab computes them anew
    expect(page.locator(f"#{FAILURES_PANEL} .failures-note"), SLOW_WAIT_MS).to_have_text(
        [re.compile("These findings were computed now: its stored findings.json is of an earlier version"), note])
    assert "were skipped" in note and "rerun the epoch" in note


def test_a_narrowing_ends_with_clear_filters_another_epoch_and_another_run(runs, viewer_url, new_page):
    work_dir, damaged, last = runs
    total = analyze(work_dir).datapoints
    page = open_run(new_page, viewer_url, work_dir)
    narrow_to_first_slice(page)
    page.click(f"#{TABLE_CLEAR_FILTERS}")
    assert_not_narrowed(page, total)

    narrow_to_first_slice(page)
    latest = int(last.split("_")[1])
    pick_epoch(page, latest - 1)
    wait_caption(page, f"epoch {latest - 1}:")
    assert_not_narrowed(page, total)

    pick_epoch(page, latest)
    wait_caption(page, f"epoch {latest}:")
    narrow_to_first_slice(page)
    pick(page, RUN_SELECT, f"{os.path.basename(damaged)} (trainer)")
    assert_not_narrowed(page, total)
    assert os.path.basename(damaged) in page.url


def test_a_reload_on_the_failures_tab_reopens_it_with_its_findings(runs, viewer_url, new_page):
    work_dir, _, _ = runs
    findings = analyze(work_dir)
    page = open_run(new_page, viewer_url, work_dir, tab=TAB_FAILURES)
    assert page.locator(f"#{TABS} .tab--selected").inner_text() == "Failures"
    expect(slice_buttons(page).locator("b"), SLOW_WAIT_MS).to_have_text([s.description for s in findings.meta.slices])
    narrow_to_first_slice(page)  # the first page's findings are live buttons


def test_a_prediction_column_with_nan_shows_class_names(runs, viewer_url, new_page):
    work_dir, _, last = runs
    table = pq.read_table(os.path.join(work_dir, last, EPOCH_TABLE_FILE), columns=["prediction"])
    assert table.schema.field("prediction").type == "double"  # NaN datapoints: not an int column
    page = open_run(new_page, viewer_url, work_dir)
    shown = column(page, "prediction")
    assert shown and all(re.fullmatch(r"\w+ \(\d+\)|n/a", text) for text in shown), shown


@pytest.mark.slow
def test_a_narrowing_stays_when_the_training_run_writes_a_new_epoch(runs, unfinished, tmp_path, new_page):
    work_dir, _, last = runs
    url, live, _ = unfinished
    page = open_run(new_page, url, live)
    size = narrow_to_first_slice(page)
    narrowed = page.locator(f"#{TABLE_CAPTION}").inner_text()
    written = shutil.copytree(os.path.join(work_dir, last), str(tmp_path / last))
    os.rename(written, os.path.join(live, last))  # the trainer finishes the epoch
    page.click(f"#{EPOCH_SELECT}")  # a refresh tick lists it (and sends the shown epoch again)
    page.get_by_role("option").filter(has_text=re.compile(rf"^epoch {int(last.split('_')[1])}\b")).wait_for()
    page.keyboard.press("Escape")
    wait_settled(page)
    assert page.locator(f"#{TABLE_CAPTION}").inner_text() == narrowed
    note = page.locator(f"#{FAILURES_FILTER_NOTE}").inner_text()
    assert f"Table filtered to {size} datapoints" in note


def test_the_note_of_a_finding_gives_the_rows_the_table_shows(runs, viewer_url, new_page):
    """With wrong only on, the table shows the finding's failures alone: the note's count is the caption's, the
    finding's own beside it, never the finding's count as if the table showed it all."""
    page = open_run(new_page, viewer_url, runs[0])
    page.locator(f"#{WRONG_ONLY} input").check()
    wait_caption(page, " of ")
    size = narrow_to_first_slice(page, "datapoints) (wrong only)")
    shown = int(re.search(r"(\d+) of", page.locator(f"#{TABLE_CAPTION}").inner_text()).group(1))
    assert shown < size, "the planted run's first slice holds passing datapoints: wrong only must hide some"
    note = page.locator(f"#{FAILURES_FILTER_NOTE}")
    expect(note).to_contain_text(f"Table filtered to {shown} datapoints")
    assert f"{size} in the finding" in note.inner_text()
    page.locator(f"#{WRONG_ONLY} input").uncheck()  # the note follows the table's own filters
    wait_caption(page, f"{size} of")
    expect(note).to_contain_text(f"Table filtered to {size} datapoints")
    assert "in the finding" not in note.inner_text()


def held_finding_answer(page) -> list:
    """Holds the server's answer to the next finding click (as a slow analysis would): the held request, in a list
    that fills when the click is sent."""
    held: list = []

    def route(request_route) -> None:
        body = json.loads(request_route.request.post_data or "{}")
        if not held and str(body.get("output", "")).startswith(f"..{TABLE_IDX_FILTER}.data"):
            held.append(request_route)
        else:
            request_route.continue_()

    page.route("**/_dash-update-component*", route)
    return held


@pytest.mark.slow
def test_a_finding_answered_after_a_run_switch_narrows_neither_run(runs, unfinished, new_page):
    work_dir, _, last = runs
    url, _, other = unfinished
    total = analyze(work_dir).datapoints
    page = open_run(new_page, url, work_dir)
    page.click(f"#{TAB_FAILURES}")
    first = page.locator(f"#{FAILURES_PANEL} .finding-button").first
    expect(first, SLOW_WAIT_MS).to_contain_text("datapoints")
    held = held_finding_answer(page)
    first.click()
    page.click(f"#{TAB_DATAPOINT}")  # the findings are not drawn again, so nothing supersedes the answer
    pick(page, RUN_SELECT, "other (trainer)")
    page.wait_for_function(f"() => new URLSearchParams(location.search).get('run') === {json.dumps(other)}"
                           f" && !['{last}', null].includes(new URLSearchParams(location.search).get('epoch'))")
    [answer] = held
    answer.continue_()  # the answer for the run just left comes back
    wait_settled(page)
    page.click(f"#{TAB_FAILURES}")  # where the note of a narrowing shows
    wait_settled(page)
    assert_not_narrowed(page, total)
    pick(page, RUN_SELECT, f"{os.path.basename(work_dir)} (trainer)")  # nor does it narrow the run it is of
    wait_caption(page, f"epoch {int(last.split('_')[1])}:")
    wait_settled(page)
    assert_not_narrowed(page, total)
