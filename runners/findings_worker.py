"""Each validation epoch's findings, computed in the background and stored beside the epoch's other outputs.

When an epoch's table and debug pages are written, rank 0 hands the epoch folder to ``BackgroundFindings``, which
analyses it off the training thread and stores ``findings.json`` in it (written atomically: complete or absent, and
every other output of the epoch is already on disk). An epoch of at most IN_PROCESS_ROWS datapoints is analysed in a
thread of the training process (a fraction of a second; an error is logged, never raised). A larger one runs
``python -m runners.analyze --run EPOCH_DIR --save`` in a separate process, at a lower priority and on one thread: a
crash or an out-of-memory kill of the analysis costs the run nothing, and its memory (up to a gigabyte for a million
datapoints) is not the training's. The viewer's Failures tab then reads ``findings.json`` and draws at once; where
it is absent it computes the findings itself and says so.

One analysis runs at a time. An epoch that ends while one runs waits; a later epoch ending meanwhile replaces it
(the latest epoch matters most; the skipped one is computed by the tab if opened). At the end of a run, the last
analysis is waited for at most ``wait_s`` seconds, then left to finish on its own.
"""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
import threading
from typing import Optional

import pyarrow.parquet as pq

from run_dir.names import EPOCH_TABLE_FILE
from runners.background_process import start_apart
from utils.errors import LanternUserError

IN_PROCESS_ROWS = 50_000
WAIT_S = 600.0
ERROR_LINES = 3


class BackgroundFindings:
    """Starts the analysis of each submitted epoch folder in a child process, one at a time."""

    def __init__(self, log: logging.Logger, wait_s: float = WAIT_S) -> None:
        self.log, self.wait_s = log, wait_s
        self._lock = threading.Lock()
        self._pending: Optional[str] = None
        self._thread: Optional[threading.Thread] = None
        self._process: Optional[subprocess.Popen] = None

    def submit(self, epoch_dir: str) -> None:
        """Analyse ``epoch_dir`` once the analysis running now (if any) ends."""
        with self._lock:
            if self._pending is not None:
                self.log.info(f"findings of {self._pending} skipped: {epoch_dir} is newer (the Failures tab computes "
                              "them if opened)")
            self._pending = epoch_dir
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name="lantern-findings", daemon=True)
                self._thread.start()

    def close(self) -> None:
        """Wait for the last analysis, at most ``wait_s`` seconds; then leave it running on its own."""
        thread = self._thread
        if thread is None:
            return
        thread.join(self.wait_s)
        if thread.is_alive():
            with self._lock:
                self._pending = None
                process = self._process
            self.log.warning(f"the failure analysis is still running after {self.wait_s:.0f} s; it goes on in the "
                             f"background (pid {process.pid if process else '?'}) and stores its findings when done")

    def _work(self) -> None:
        while True:
            with self._lock:
                epoch_dir, self._pending = self._pending, None
                if epoch_dir is None:
                    self._thread = None
                    return
            self._analyse(epoch_dir)

    def _analyse(self, epoch_dir: str) -> None:
        try:
            rows = epoch_rows(epoch_dir)
        except (OSError, LanternUserError, ValueError) as exc:
            self.log.warning(f"no findings for {epoch_dir}: its epoch table cannot be read ({exc})")
            return
        if rows > IN_PROCESS_ROWS:
            self._analyse_apart(epoch_dir)
            return
        try:
            from analysis.failures import analyze  # here: training starts without the analysis's libraries

            analyze(epoch_dir, save=True)
        except Exception as exc:  # the findings are a by-product of validation: they never stop training
            self.log.warning(f"the failure analysis of {epoch_dir} stopped ({type(exc).__name__}: {exc}); the "
                             "Failures tab computes its findings when opened")
        else:
            self.log.info(f"findings of {epoch_dir} stored")

    def _analyse_apart(self, epoch_dir: str) -> None:
        with tempfile.TemporaryFile("w+") as errors:  # not a pipe: the analysis may outlive this process
            try:
                process = start_apart("runners.analyze", ["--run", epoch_dir, "--save"], errors)
            except OSError as exc:
                self.log.warning(f"could not start the failure analysis of {epoch_dir} ({exc}); the Failures tab "
                                 "computes its findings when opened")
                return
            with self._lock:
                self._process = process
            process.wait()
            errors.seek(0)
            said = errors.read()
        if process.returncode != 0:
            last = " | ".join(said.strip().splitlines()[-ERROR_LINES:]) or f"exit status {process.returncode}"
            self.log.warning(f"the failure analysis of {epoch_dir} stopped ({last}); the epoch's other outputs are "
                             "complete, and the Failures tab computes its findings when opened")
        else:
            self.log.info(f"findings of {epoch_dir} stored")


def epoch_rows(epoch_dir: str) -> int:
    """The number of datapoints of the epoch's table, from its footer."""
    return pq.ParquetFile(os.path.join(epoch_dir, EPOCH_TABLE_FILE)).metadata.num_rows
