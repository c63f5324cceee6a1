"""The disk budget hook: a trainer's full debug outputs kept under ``debug_disk_budget_gb`` after each epoch, the
oldest epochs' removed first (``run_dir/budget.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from run_dir.budget import finish_interrupted_removals, keep_under_budget
from runners.hooks.base import Runner, RunnerHook, Trainer
from runners.run_writes import write_run_file
from utils.settings import POSITIVE_NUMBER, Settings, setting


@dataclass(frozen=True)
class DiskBudgetSettings(Settings):
    """``config['debug_disk_budget_gb']``, the disk budget hook's setting."""

    debug_disk_budget_gb: Optional[float] = setting(
        None, POSITIVE_NUMBER, "the gigabytes (of 2**30 bytes) of full debug outputs kept: after each epoch, the "
                               "oldest epochs' are removed until the rest fits; while an epoch is written, the disk "
                               "holds up to the budget plus that epoch",
        identifies_run=False, see="[debugger.md](debugger.md#what-to-keep-capture-policies)")


class DiskBudgetHook(RunnerHook):
    """Rank 0, at start-up (completing a removal that a killed run left half done) and after each epoch."""

    def __init__(self, settings: DiskBudgetSettings) -> None:
        self.budget_gb = settings.debug_disk_budget_gb

    def before_run(self, runner: Trainer) -> None:
        self._keep(runner, runner.cum_epochs)

    def after_epoch(self, runner: Trainer, epoch: int) -> None:
        self._keep(runner, epoch + 1)

    def _keep(self, runner: Runner, completed_epochs: int) -> None:
        if not runner.is_main:
            return
        work_dir, budget_gb = runner.work_dir, self.budget_gb
        if budget_gb is None:
            write_run_file(work_dir, lambda: finish_interrupted_removals(work_dir))
        else:
            write_run_file(work_dir, lambda: keep_under_budget(work_dir, budget_gb, runner.logger, completed_epochs))
