"""The training monitor hook: the checks of ``config['training_monitor']`` at each training step and epoch
(``debuggers/training_monitor.py``)."""

from __future__ import annotations

from typing import Any, Optional

import torch

from debuggers.training_monitor import MonitorSettings, TrainingMonitor
from runners.hooks.base import EvalPass, Runner, RunnerHook, Trainer


class TrainingMonitorHook(RunnerHook):
    """Builds the monitor on every rank at start-up (each checks its own batch; rank 0 writes the file); ``settings``
    None: no monitoring."""

    def __init__(self, settings: Optional[MonitorSettings]) -> None:
        self.settings = settings
        self.monitor: Optional[TrainingMonitor] = None

    def before_run(self, runner: Trainer) -> None:
        if self.settings is None:
            return
        steps = runner.optimizer_steps_per_epoch
        self.monitor = TrainingMonitor(runner.eval_model, runner.optimizer, self.settings, runner.work_dir,
                                       runner.logger, runner.rank, runner.world_size, runner.cum_epochs, steps)
        every = self.settings.every_n_steps
        total = steps * runner.tot_epochs if steps is not None else None
        if total is not None and every > total:
            runner.logger.warning(f"{MonitorSettings.where()}['every_n_steps'] = {every} is more than this run's "
                                  f"{total} training steps: only step 0 gets a row")

    def before_train_epoch(self, runner: Trainer, epoch: int) -> None:
        if self.monitor is not None:
            self.monitor.begin_epoch(epoch)

    def before_optimizer_step(self, runner: Trainer, batch: dict[str, Any], loss: torch.Tensor,
                              scaler: Optional[torch.amp.GradScaler]) -> bool:
        """The step's checks: False skips a non-finite step's update; a stop raises ``NonFiniteTrainingError``."""
        return self.monitor is None or self.monitor.check_step(batch, loss, scaler)

    def after_train_step(self, runner: Trainer, batch: dict[str, Any]) -> None:
        if self.monitor is not None:
            self.monitor.after_step()

    def after_train_epoch(self, runner: Trainer, epoch: int) -> None:
        if self.monitor is not None:
            self.monitor.end_epoch()

    def after_eval_epoch(self, runner: Runner, eval_pass: EvalPass, scores: dict[str, Any]) -> None:
        if self.monitor is not None:
            self.monitor.add_validation(scores["aggregated"])

    def close(self, runner: Runner) -> None:
        if self.monitor is not None:
            self.monitor.close()
