"""Verifying a finding from the Failures tab: a background job (the server keeps answering), one at a time per run,
cancellable, refused without --trust-configs, its failure said in the tab and the server's log, a segmentation's
finding too; and in a real browser, a button beside each finding a check can test, the status and the verdict
under a heading that says what it rests on."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time

import pytest

from analysis.epoch_table import EpochTable
from analysis.failures import analyze
from analysis.finding_plans import finding_entries, not_offered
from analysis.replication import REPLICATED, Replication
from run_dir.names import EPOCH_TABLE_FILE
from runners.eval_viewer.failures import verify_jobs
from runners.eval_viewer.failures.ids import TAB_FAILURES, VERIFY, VERIFY_CANCEL, VERIFY_STATUS
from runners.eval_viewer.failures.verify_jobs import CANCELLED, DONE, FAILED, RUNNING, VerifyJobs, VerifyRefused
from runners.verify import Verification, verify_findings
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, WAIT_MS, browser_or_skip
from tests.reliability.viewer_server import serve_viewer

pytestmark = [pytest.mark.timeout(600), pytest.mark.usefixtures("one_thread")]
UNIT = {"separators": [{"column": "unit_energy.c3", "auroc": 0.7, "direction": "higher in failures"},
                       {"column": "monitor_energy.c0", "auroc": 0.7, "direction": "higher in failures"}]}


def ended(jobs: VerifyJobs, run: str, timeout: float = 120.0):
    """The run's job once it has ended (polled, as the tab does)."""
    deadline = time.monotonic() + timeout
    while jobs.job(run).running:
        assert time.monotonic() < deadline, f"the verification did not end within {timeout} s: {jobs.job(run)}"
        time.sleep(0.05)
    return jobs.job(run)


def test_a_verification_runs_in_the_background_one_at_a_time_per_run(planted_units_run):
    run, epoch_dir = planted_units_run["work_dir"], planted_units_run["epoch_dir"]
    jobs = VerifyJobs(trust_configs=True)
    job = jobs.start(run, "epoch_2", epoch_dir, "separators-0", UNIT)
    assert job.state == RUNNING  # start() returned while the rerun goes on: the server is free to answer
    with pytest.raises(VerifyRefused, match="separators-0.*cancel it or wait"):
        jobs.start(run, "epoch_2", epoch_dir, "separators-1", UNIT)
    done = ended(jobs, run)
    assert done.state == DONE, done.message
    [expected] = verify_findings(epoch_dir, UNIT, ["separators-0"], trust_configs=True)
    assert done.result == {**expected.to_dict(), "seconds": done.result["seconds"]}

    second = jobs.start(run, "epoch_2", epoch_dir, "separators-1", UNIT)  # the run is free again
    assert ended(jobs, run) is second and second.state == DONE
    assert [job.key for job in jobs.results(run, "epoch_2")] == ["separators-0", "separators-1"]


def test_a_running_verification_is_cancelled_and_one_without_trust_is_refused(planted_units_run):
    run, epoch_dir = planted_units_run["work_dir"], planted_units_run["epoch_dir"]
    jobs = VerifyJobs(trust_configs=True)
    job = jobs.start(run, "epoch_2", epoch_dir, "separators-0", UNIT)
    assert jobs.cancel(run)  # before its first batch: the model is still being rebuilt
    assert ended(jobs, run).state == CANCELLED and jobs.results(run, "epoch_2") == []
    assert not jobs.cancel(run) and job.message == "cancelled"
    with pytest.raises(VerifyRefused, match="--trust-configs"):
        VerifyJobs(trust_configs=False).start(run, "epoch_2", epoch_dir, "separators-0", UNIT)
    with pytest.raises(VerifyRefused, match="no finding slices-7"):
        jobs.start(run, "epoch_2", epoch_dir, "slices-7", UNIT)


def test_verifications_of_several_runs_do_not_pile_up_and_a_cancelled_one_frees_the_viewer(planted_units_run):
    """Each verification rebuilds a model and uses every core: clicks on the findings of several runs start one,
    the others are refused naming it. Once it is cancelled and has stopped (after the batch in hand) another may
    start (``tests/reliability/test_verify_turns.py``: not before)."""
    run, epoch_dir = planted_units_run["work_dir"], planted_units_run["epoch_dir"]
    jobs = VerifyJobs(trust_configs=True)
    jobs.start(run, "epoch_2", epoch_dir, "separators-0", UNIT)
    with pytest.raises(VerifyRefused, match="separators-0.*cancel it or wait"):
        jobs.start(f"{run}-copy", "epoch_2", epoch_dir, "separators-1", UNIT)
    assert jobs.cancel(run)
    assert ended(jobs, run).state == CANCELLED and jobs.job(run).ended.wait(60)
    other = jobs.start(f"{run}-copy", "epoch_2", epoch_dir, "separators-1", UNIT)
    assert ended(jobs, f"{run}-copy") is other and other.state == DONE, other.message


def verify_button(page, key: str):
    """A finding's verify button: Dash writes a dict id as JSON with sorted keys."""
    return page.locator(f"""[id='{{"index":"{key}","type":"{VERIFY}"}}']""")


def test_the_tab_verifies_a_finding_and_shows_its_verdict(planted_units_run):
    browser_or_skip()
    from playwright.sync_api import sync_playwright

    findings = analyze(planted_units_run["work_dir"])
    assert findings.internals.separators, "the run has no separating quantity to verify"
    key = "internals.separators-0"
    [expected] = verify_findings(planted_units_run["epoch_dir"], findings.to_dict(), [key], trust_configs=True)
    logs = os.path.dirname(planted_units_run["work_dir"])
    errors = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for trusted in (False, True):
            with serve_viewer([logs], trust_configs=trusted) as url:
                page = browser.new_page(viewport={"width": 1500, "height": 1000})
                page.set_default_timeout(4 * WAIT_MS)  # the tab analyses the epoch first: slow on a busy machine
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                page.goto(f"{url}/?tab={TAB_FAILURES}", wait_until="networkidle")
                verify_button(page, key).click()
                status = page.locator(f"#{VERIFY_STATUS}")
                if not trusted:
                    status.locator("text=--trust-configs").wait_for()
                else:
                    status.locator(f"text={expected.verdict}").wait_for()
                    shown = status.inner_text()
                    counts = expected.comparison.finding
                    assert f"{key} ({expected.finding})" in shown
                    assert f"failing {counts.failures_before} → {counts.failures_after} of {counts.size}" in shown
                    assert not page.locator(f"#{VERIFY_CANCEL}").is_visible()  # nothing runs any more
                page.close()  # before its server stops: the page's refresh would find no server
        browser.close()
    assert not errors, f"the page logged errors: {errors}"


@pytest.mark.slow
def test_a_segmentation_finding_is_verified_from_the_tab(segmentation):
    """The segmentation run names its failure definition (the worst 15% by IoU) and its table has no label or
    prediction: the tab's verification reads both right (it once asked DuckDB for no column at all)."""
    jobs = VerifyJobs(trust_configs=True)
    key = next(key for key, _ in finding_entries(segmentation["findings"]) if key.startswith("meta.slices"))
    jobs.start(segmentation["work_dir"], "last", segmentation["epoch_dir"], key, segmentation["findings"])
    done = ended(jobs, segmentation["work_dir"], timeout=300)
    assert done.state == DONE, done.message
    assert done.result["verdict"] in ("confirmed", "correlational", "inconclusive", "replicated", "not replicated")


def test_a_failed_verification_is_said_in_the_tab_and_in_the_server_log(planted_units_run, tmp_path, caplog):
    run = str(tmp_path / "planted_units")
    shutil.copytree(planted_units_run["work_dir"], run)
    epoch_dir = os.path.join(run, os.path.basename(planted_units_run["epoch_dir"]))
    with open(os.path.join(epoch_dir, "checkpoint.pt"), "wb") as damaged:
        damaged.write(b"not a checkpoint")
    jobs = VerifyJobs(trust_configs=True)
    with caplog.at_level(logging.WARNING, logger=verify_jobs.__name__):
        jobs.start(run, "epoch_2", epoch_dir, "separators-0", UNIT)
        failed = ended(jobs, run)
    assert failed.state == FAILED and "checkpoint" in failed.message
    assert any("separators-0" in record.getMessage() and "checkpoint" in record.getMessage()
               for record in caplog.records), caplog.records


@pytest.mark.slow
def test_the_tab_offers_a_button_per_testable_finding_and_heads_each_verdict_by_what_it_rests_on(planted_units_run):
    """A verify button beside exactly the findings a check can test (none beside label suspects, dead units,
    restatements); a unit's patch under "Verified by intervention", a finding no intervention confirms under
    "Replicated on held-out datapoints"."""
    browser_or_skip()
    from playwright.sync_api import sync_playwright

    findings = analyze(planted_units_run["work_dir"]).to_dict()
    roles = EpochTable(os.path.join(planted_units_run["epoch_dir"], EPOCH_TABLE_FILE)).roles
    offered = {key for key, _ in finding_entries(findings) if not_offered(key, roles) is None}
    results = {r.key: r for r in verify_findings(planted_units_run["epoch_dir"], findings, sorted(offered),
                                                 trust_configs=True)}
    by_intervention = next(key for key, r in results.items() if isinstance(r, Verification))
    by_replication = next(key for key, r in results.items() if isinstance(r, Replication) and r.verdict == REPLICATED)
    logs = os.path.dirname(planted_units_run["work_dir"])
    with sync_playwright() as playwright, serve_viewer([logs], trust_configs=True) as url:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.set_default_timeout(4 * WAIT_MS)
        page.goto(f"{url}/?tab={TAB_FAILURES}", wait_until="networkidle")
        verify_button(page, by_intervention).wait_for()
        buttons = page.locator(f"""[id*='"type":"{VERIFY}"']""")
        shown = {json.loads(buttons.nth(i).get_attribute("id"))["index"] for i in range(buttons.count())}
        assert shown == offered
        status = page.locator(f"#{VERIFY_STATUS}")
        for key in (by_intervention, by_replication):
            verify_button(page, key).click()
            status.locator(f"text={key} ({results[key].finding})").wait_for()
            page.locator(f"#{VERIFY_CANCEL}").wait_for(state="hidden")
        headings = status.locator("h4").all_inner_texts()
        assert headings == ["Verified by intervention", "Replicated on held-out datapoints"], headings
        replicated = status.locator("li", has_text=f"{by_replication} (").inner_text()
        assert replicated.startswith(results[by_replication].verdict) and "on B:" in replicated
        page.close()
        browser.close()
