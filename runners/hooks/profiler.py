"""The profiler hook: ``torch.profiler`` over chosen training steps (``config['profiler']``), its trace and a summary
of the ops that took the most time saved in the run folder, for Perfetto (or ``chrome://tracing``) and the viewer's
Training tab.

A profiled step runs from just after the previous optimizer step to just after its own: loading the batch, the
forward and backward passes and the optimizer's step (with gradient accumulation, all its batches). The window ends
at its last step or at the end of the epoch, whichever comes first. Rank 0 alone profiles: under torchrun the ranks
run the same steps.
"""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch.profiler import ProfilerActivity, profile

from run_dir import RunDir
from run_dir.names import PROFILER_TRACE_FILE
from run_dir.profiler_summary import ProfiledOp, ProfilerSummary, write_profiler_summary
from runners.hooks.base import Runner, RunnerHook, Trainer
from runners.run_writes import write_run_file
from utils.atomic_files import atomic_write
from utils.settings import Settings, setting, whole_number

MAX_PROFILED_STEPS = 1000  # a trace grows with every step: a few are what a profile needs


@dataclass(frozen=True)
class ProfilerSettings(Settings):
    """``config['profiler']``: ``True`` for these defaults, or a dict of some of them."""

    KEY = "profiler"
    DOC = ("`torch.profiler` over chosen training steps: its trace in `profiler_trace.json.gz` (Perfetto, "
           "chrome://tracing) and the ops that took the most time in the viewer's Training tab: `True` or a dict of "
           "settings (off by default)")
    SEE = "[training_monitor.md](training_monitor.md#profiling-chosen-steps)"
    IDENTIFIES_RUN = False  # it changes what is measured, not what is trained

    first_step: int = setting(5, whole_number(0), "the first training step profiled, counted from 0 over the run "
                                                  "(the first steps are slower: warm-up)")
    steps: int = setting(3, whole_number(1, MAX_PROFILED_STEPS), "how many steps are profiled")
    top_ops: int = setting(30, whole_number(1, 1000), "ops kept in the summary, those with the most time of their "
                                                      "own")


class ProfilerHook(RunnerHook):
    """Profiles ``settings.steps`` optimizer steps from ``settings.first_step`` (rank 0; other ranks drop their
    settings at ``before_run``); ``settings`` None: off."""

    def __init__(self, settings: Optional[ProfilerSettings]) -> None:
        self.settings = settings
        self.step = 0  # the optimizer steps done by the run so far
        self._profile: Optional[profile] = None
        self._started = (0, 0.0)  # the step and the time the window began

    def before_run(self, runner: Trainer) -> None:
        if not runner.is_main:
            self.settings = None
        if self.settings is None:
            return
        per_epoch = runner.optimizer_steps_per_epoch
        self.step = runner.cum_epochs * per_epoch if per_epoch is not None else 0
        first = self.settings.first_step
        total = per_epoch * runner.tot_epochs if per_epoch is not None else None
        if total is not None and first >= total:
            runner.logger.warning(f"{ProfilerSettings.where()}['first_step'] = {first} is beyond this run's {total} "
                                  "training steps: nothing is profiled")
        elif self.step > first:
            runner.logger.info(f"Profiler: step {first} was trained before this run resumed; nothing is profiled")

    def before_train_epoch(self, runner: Trainer, epoch: int) -> None:
        self._start_if_due()

    def after_train_step(self, runner: Trainer, batch: dict[str, Any]) -> None:
        if self.settings is None:
            return
        self.step += 1
        if self._profile is not None and self.step >= self._started[0] + self.settings.steps:
            self._finish(runner)
        self._start_if_due()

    def after_train_epoch(self, runner: Trainer, epoch: int) -> None:
        if self._profile is not None:  # the window ends with the epoch: validation is not training
            self._finish(runner)

    def close(self, runner: Runner) -> None:
        if self._profile is not None:  # the run stopped inside the window: nothing complete to save
            self._profile.stop()
            self._profile = None

    def _start_if_due(self) -> None:
        if self.settings is None or self._profile is not None or self.step != self.settings.first_step:
            return
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        self._profile = profile(activities=activities)
        self._profile.start()
        self._started = (self.step, time.perf_counter())

    def _finish(self, runner: Trainer) -> None:
        elapsed = time.perf_counter() - self._started[1]
        self._profile.stop()
        profiled, self._profile = self._profile, None
        first, steps = self._started[0], self.step - self._started[0]
        run = RunDir(runner.work_dir)
        write_run_file(run.profiler_trace, lambda: atomic_write(run.profiler_trace,
                                                                lambda temp: _write_trace(profiled, temp)))
        summary = ProfilerSummary(first, steps, runner.cum_epochs, runner.device.type, 1000 * elapsed / max(steps, 1),
                                  PROFILER_TRACE_FILE, _top_ops(profiled, self.settings.top_ops))
        write_run_file(run.profiler_summary, lambda: write_profiler_summary(run.profiler_summary, summary))
        slowest = ", ".join(f"{op.name} {op.self_cpu_ms + op.self_device_ms:.1f} ms" for op in summary.ops[:3])
        runner.logger.info(f"Profiler: steps {first}-{first + steps - 1} took {summary.ms_per_step:.1f} ms each; "
                           f"the most time of their own: {slowest}; the trace is {run.profiler_trace} (open it in "
                           "https://ui.perfetto.dev), the summary in the viewer's Training tab")


def _write_trace(profiled: profile, path: str) -> None:
    """The trace as gzipped Chrome JSON at ``path``: exported to a temporary folder first (the exporter writes a file
    by name)."""
    with tempfile.TemporaryDirectory() as folder:
        exported = os.path.join(folder, "trace.json")
        profiled.export_chrome_trace(exported)
        with open(exported, "rb") as source, gzip.open(path, "wb") as target:
            shutil.copyfileobj(source, target)


def _top_ops(profiled: profile, count: int) -> list[ProfiledOp]:
    """The ``count`` ops with the most time of their own (CPU and device), summed over the profiled steps."""
    ops = [ProfiledOp(event.key, int(event.count), event.self_cpu_time_total / 1000, event.cpu_time_total / 1000,
                      getattr(event, "self_device_time_total", 0.0) / 1000) for event in profiled.key_averages()]
    return sorted(ops, key=lambda op: op.self_cpu_ms + op.self_device_ms, reverse=True)[:count]
