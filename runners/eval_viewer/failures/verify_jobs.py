"""Verifications started from the Failures tab: a rerun of the model (``runners.verify``) in a background thread.

A verification takes seconds to minutes; the server must keep answering meanwhile, so each runs in a thread of its
own and the tab polls its status. One at a time in the viewer, whatever the run (each rebuilds a model and uses
every core: a second click while one runs is refused, saying which). The turn is held by what runs, not by what
was asked: a running one is cancelled between batches, and holds the turn until its thread has really ended (a new
start waits ``STOP_WAIT_S`` for it, then is refused saying it is still stopping); otherwise starting and cancelling
in a row left a thread per click, each rebuilding the model. It imports the run's config file, so it needs the viewer's
``--trust-configs``; without it a click says so. The last ``MAX_KEPT`` results are kept by run, epoch and finding.
A verification that fails says why in the tab and in the server's log (with the traceback where the run's own code
raised).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Optional

from analysis.finding_plans import finding_entries, finding_name
from runners.run_model import TRUST_FLAG, Cancelled
from runners.verify import verify_findings
from utils.errors import LanternUserError

RUNNING, DONE, FAILED, CANCELLED = "running", "done", "failed", "cancelled"
MAX_KEPT = 64
STOP_WAIT_S = 10.0  # how long a start waits for a cancelled verification to stop (it stops after its batch)
LOG = logging.getLogger(__name__)


class VerifyRefused(Exception):
    """A verification cannot start now; the message says why and what to do."""


@dataclass
class VerifyJob:
    """One verification of one finding; ``state`` and ``message`` change while it runs."""

    run: str
    epoch: str
    key: str
    finding: str
    state: str = RUNNING
    message: str = "starting: rebuilding the model from the run's config and checkpoint"
    result: Optional[dict[str, Any]] = None  # Verification.to_dict() or NotVerifiable.to_dict()
    cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    ended: threading.Event = field(default_factory=threading.Event, repr=False)  # its thread has nothing left to do

    @property
    def running(self) -> bool:
        return self.state == RUNNING


class VerifyJobs:
    """The viewer's verifications: the latest job of each run, and kept results."""

    def __init__(self, trust_configs: bool) -> None:
        self.trust_configs = trust_configs
        self._lock = threading.Lock()
        self._latest: dict[str, VerifyJob] = {}
        self._results: OrderedDict[tuple[str, str, str], VerifyJob] = OrderedDict()

    def start(self, run: str, epoch: str, epoch_dir: str, key: str, findings: dict[str, Any]) -> VerifyJob:
        """Start verifying finding ``key`` of ``findings`` (``Findings.to_dict()`` of ``epoch_dir``)."""
        if not self.trust_configs:
            raise VerifyRefused(f"Verifying reruns the run's model, built from the config file the run names, which "
                                f"runs its code: restart the viewer with {TRUST_FLAG} to verify (only for runs you "
                                "trust).")
        finding = _finding_name(findings, key)
        with self._lock:
            busy = self._busy()
        if busy is not None and busy.cancel.is_set():
            busy.ended.wait(STOP_WAIT_S)
        with self._lock:
            busy = self._busy()
            if busy is not None:
                which = "this run" if busy.run == run else os.path.basename(os.path.normpath(busy.run))
                if busy.cancel.is_set():
                    raise VerifyRefused(f"The cancelled verification of {which} ({busy.key}) is still stopping (after "
                                        "the batch in hand); start again in a moment: one runs at a time.")
                raise VerifyRefused(f"A verification of {which} is running ({busy.key}: {busy.finding}); cancel it "
                                    "or wait for it to end: one runs at a time, each uses every core.")
            job = VerifyJob(run, epoch, key, finding)
            self._latest[run] = job
        threading.Thread(target=self._verify, args=(job, epoch_dir, findings), daemon=True,
                         name=f"verify {key}").start()
        return job

    def _busy(self) -> Optional[VerifyJob]:
        """The job whose thread has not ended, cancelled or not (under ``_lock``)."""
        return next((job for job in self._latest.values() if not job.ended.is_set()), None)

    def job(self, run: str) -> Optional[VerifyJob]:
        """The latest verification of ``run`` (running or ended), None before any."""
        with self._lock:
            return self._latest.get(run)

    def results(self, run: str, epoch: str) -> list[VerifyJob]:
        """The kept verifications of ``run``'s ``epoch`` that ended with a result, in the order they ended."""
        with self._lock:
            return [job for (job_run, job_epoch, _), job in self._results.items()
                    if (job_run, job_epoch) == (run, epoch)]

    def cancel(self, run: str) -> bool:
        """Ask the running verification of ``run`` to stop (it does between batches); False when none runs."""
        job = self.job(run)
        if job is None or not job.running:
            return False
        job.cancel.set()
        job.message = "cancelling: it stops after the batch in hand"
        return True

    def _verify(self, job: VerifyJob, epoch_dir: str, findings: dict[str, Any]) -> None:
        def say(message: str) -> None:
            job.message = message

        try:
            [result] = verify_findings(epoch_dir, findings, [job.key], trust_configs=True, cancel=job.cancel,
                                       progress=say)
            job.result, job.message, state = result.to_dict(), "", DONE
        except Cancelled:
            job.message, state = "cancelled", CANCELLED
        except LanternUserError as exc:
            job.message, state = str(exc), FAILED
            LOG.warning("verifying %s of %s failed: %s", job.key, job.run, exc)
        except Exception as exc:  # the run's own model or dataset code failed: say so, the viewer goes on
            job.message, state = f"the rerun failed: {type(exc).__name__}: {exc}", FAILED
            LOG.exception("verifying %s of %s failed", job.key, job.run)
        with self._lock:
            job.state = state
            if state == DONE:
                self._results.pop((job.run, job.epoch, job.key), None)  # a new result of a finding ends last
                self._results[(job.run, job.epoch, job.key)] = job
                while len(self._results) > MAX_KEPT:
                    self._results.popitem(last=False)
            job.ended.set()


def _finding_name(findings: dict[str, Any], key: str) -> str:
    entries = dict(finding_entries(findings))
    if key not in entries:
        raise VerifyRefused(f"This epoch has no finding {key}; reopen the Failures tab to see its findings.")
    return finding_name(entries[key])
