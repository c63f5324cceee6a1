"""Verifications in the viewer are bounded by what runs, not by what was asked.

Before: a cancelled verification gave up the viewer's turn at once, while its thread went on rebuilding the model;
starting and cancelling 20 times in a row left 20 verification threads alive at once. Now a cancelled one holds
the turn until its thread has ended: a new start waits for it (``STOP_WAIT_S``) or is refused saying it is still
stopping.
"""

from __future__ import annotations

import threading
import time

import pytest

from runners.eval_viewer.failures.verify_jobs import CANCELLED, DONE, VerifyJobs, VerifyRefused
from tests.runners.conftest import one_thread, planted_units_run  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.timeout(900), pytest.mark.usefixtures("one_thread")]
UNIT = {"separators": [{"column": "unit_energy.c3", "auroc": 0.7, "direction": "higher in failures"}]}


def verification_threads() -> int:
    return sum(thread.name.startswith("verify ") for thread in threading.enumerate())


def test_starting_and_cancelling_20_times_keeps_one_verification_alive(planted_units_run):  # noqa: F811
    run, epoch_dir = planted_units_run["work_dir"], planted_units_run["epoch_dir"]
    jobs = VerifyJobs(trust_configs=True)
    alive, started, refused = [], [], []
    for _ in range(20):
        try:
            started.append(jobs.start(run, "epoch_2", epoch_dir, "separators-0", UNIT))
        except VerifyRefused as exc:
            refused.append(str(exc))
        alive.append(verification_threads())
        jobs.cancel(run)
    assert max(alive) == 1, alive
    assert all("is still stopping" in message for message in refused)
    last = started[-1]
    assert last.ended.wait(300) and last.state == CANCELLED
    deadline = time.monotonic() + 60
    while verification_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert verification_threads() == 0
    after = jobs.start(run, "epoch_2", epoch_dir, "separators-0", UNIT)  # the viewer's turn is free again
    assert after.ended.wait(300) and after.state == DONE, after.message
