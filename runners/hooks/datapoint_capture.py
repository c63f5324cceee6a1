"""The datapoint capture hook: what the viewer shows of each evaluated datapoint (its inputs, labels and meta
info), recorded as the eval loop sees it (``runners/datapoint_capture.py``)."""

from __future__ import annotations

import os
from typing import Any, Optional

from debuggers.pages.watchdog import DEFAULT_STALL_TIMEOUT_S
from run_dir.names import DATAPOINTS_DIR
from runners.datapoint_capture import CaptureLimits, DatapointCapture, capture_is_complete
from runners.hooks.base import EvalPass, Runner, RunnerHook
from utils import distributed


class DatapointCaptureHook(RunnerHook):
    """Captures each pass, except a trainer's validation set once a capture of it is complete (it is the same every
    epoch), and except after a capture whose writer got stuck (the disk hangs: the run does not wait on it again).
    ``limits`` None: nothing is captured."""

    def __init__(self, limits: Optional[CaptureLimits]) -> None:
        self.limits = limits
        self._capture: Optional[DatapointCapture] = None
        self._stuck = False

    def before_eval_epoch(self, runner: Runner, eval_pass: EvalPass) -> None:
        folder = os.path.join(runner.work_dir, DATAPOINTS_DIR)
        validation = eval_pass.epoch is not None
        if self.limits is None or self._stuck or (validation and capture_is_complete(folder)):
            return
        debugger = runner.debugger
        stall_timeout_s = debugger.stall_timeout_s if debugger is not None else DEFAULT_STALL_TIMEOUT_S
        self._capture = DatapointCapture(folder, self.limits, runner.logger, runner.rank, runner.world_size,
                                         stall_timeout_s)

    def before_eval_batch(self, runner: Runner, batch: dict[str, Any]) -> None:
        if self._capture is not None:
            self._capture.add_batch(batch)

    def after_eval_epoch(self, runner: Runner, eval_pass: EvalPass, scores: dict[str, Any]) -> None:
        captured = None
        if self._capture is not None:
            captured = self._capture.finish()
            self._stuck = self._capture.stuck
            self._capture = None
        if self.limits is None:
            return
        every_rank = [c for c in distributed.gather_objects(captured) if c is not None]  # every rank gathers
        if every_rank and runner.is_main:
            datapoints, nbytes = (sum(counts) for counts in zip(*every_rank))
            ranks = f" by {len(every_rank)} ranks" if runner.world_size > 1 else ""
            runner.logger.info(f"Captured the inputs, labels and meta info of {datapoints} datapoints for the viewer"
                               f"{ranks} ({nbytes / 2**20:.1f} MB) in {os.path.join(runner.work_dir, DATAPOINTS_DIR)}")

    def close(self, runner: Runner) -> None:
        if self._capture is not None:
            self._capture.close()
