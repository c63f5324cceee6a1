"""``BaseTrainer``: train, validate every epoch, keep checkpoints, debug at checkpoint epochs.

Its work dir's layout: ``run_dir`` (the package's docstring).

An epoch counts as done once the progress file says so; it is written last, so a
run killed at any point restarts from the last finished epoch and redoes the
rest with the same per-epoch seeds.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import Iterable, Sized
from contextlib import AbstractContextManager
from typing import Any, Optional

import torch
from torch.utils.data import DistributedSampler, RandomSampler

from debuggers.training_monitor import MonitorSettings
from run_dir.names import (
    CHECKPOINT_FILE,
    PROGRESS_FILE,
    TRAINER_LOG,
    TRAINING_LOSSES_FILE,
    VALIDATION_SCORES_FILE,
    epoch_dir_name,
)
from runners.base_runner import BaseRunner, seed_everything, write_scores
from runners.checkpoints import load_checkpoint_file, load_model_state
from runners.config_keys import TRAINER_KEYS, TrainerSettings
from runners.hooks import (
    DiskBudgetHook,
    DiskBudgetSettings,
    EvalPass,
    ProfilerHook,
    ProfilerSettings,
    RunnerHook,
    TrainingMonitorHook,
)
from runners.overfit import OverfitSettings, RepeatedBatch, verdict
from runners.progress import Progress
from runners.run_writes import write_run_file
from runners.training_step import AccumulationWindow, Precision, TrainingStepSettings
from utils import distributed
from utils.atomic_files import atomic_torch_save, atomic_write_json, read_json
from utils.builders import build_from_config
from utils.errors import CheckpointError, ConfigError
from utils.ops import apply_tensor_op, idx_list


class BaseTrainer(BaseRunner):
    """Config-driven training loop with validation, checkpoints and the debugger."""

    REQUIRED_KEYS = ("model", "metric", "criterion", "optimizer", "train_dataset", "val_dataset", "epochs")
    CONFIG_KEYS = TRAINER_KEYS
    LOG_FILE = TRAINER_LOG
    EVAL_DATASET_KEY = "val_dataset"
    FINISHED_WORK_FILE = PROGRESS_FILE

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        self.trainer_settings = TrainerSettings.from_config(config)
        self.step_settings = TrainingStepSettings.from_config(config)
        self.overfit = OverfitSettings.from_config(config)
        self.tot_epochs = self.trainer_settings.epochs

    def _hooks_of(self, config: dict[str, Any]) -> list[RunnerHook]:
        return [*super()._hooks_of(config), DiskBudgetHook(DiskBudgetSettings.from_config(config)),
                TrainingMonitorHook(MonitorSettings.from_config(config)),
                ProfilerHook(ProfilerSettings.from_config(config))]

    # ----------------------------------------------------------- initialisation
    def _init_components_(self) -> None:
        self._init_device_()
        self._init_work_dir_()
        self._init_logger()
        self._init_determinism_()
        self._init_state_()
        self._init_dataloaders_()
        self._init_criterion_()
        self._init_metric_()
        self._init_model_()
        self._init_optimizer_()
        self._init_scheduler_()
        self._init_training_step_()
        self._load_checkpoint_()
        self._init_debugger()

    def _init_state_(self) -> None:
        self.cum_epochs = 0
        self.best_epoch: int | None = None
        self.best_score: float | None = None
        self._init_checkpoint_indices()

    def _init_checkpoint_indices(self) -> None:
        """Epochs whose checkpoint is kept and whose validation is debugged."""
        method = self.trainer_settings.checkpoint_method
        last = self.tot_epochs - 1
        if method == "all":
            self.checkpoint_indices = list(range(self.tot_epochs))
        elif method == "latest":
            self.checkpoint_indices = [last]
        else:
            self.checkpoint_indices = list(range(method - 1, self.tot_epochs, method))
            if last not in self.checkpoint_indices:
                self.checkpoint_indices.append(last)

    def _init_dataloaders_(self) -> None:
        self.train_dataloader = self._build_dataloader("train_dataset", "train_dataloader", self._train_sampler)
        self.val_dataloader = self._build_dataloader("val_dataset", "val_dataloader", self._eval_sampler)

    def _train_sampler(self, dataset: Any) -> Any:
        if self.world_size > 1:
            return DistributedSampler(dataset, self.world_size, self.rank, shuffle=True, seed=self.seed)
        return RandomSampler(dataset, generator=torch.Generator())

    def _init_criterion_(self) -> None:
        self.criterion = build_from_config(self.config["criterion"], "config['criterion']")

    def _init_model_(self) -> None:
        super()._init_model_()
        if self.world_size > 1:
            device_ids = [self.device.index] if self.device.type == "cuda" else None
            self.model = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=device_ids)

    def _init_optimizer_(self) -> None:
        self.optimizer = build_from_config(
            self.config["optimizer"], "config['optimizer']", params=self.model.parameters())

    def _init_scheduler_(self) -> None:
        entry = self.config.get("scheduler")
        self.scheduler = build_from_config(entry, "config['scheduler']", optimizer=self.optimizer) if entry else None

    def _init_training_step_(self) -> None:
        """Mixed precision, the accumulation window, and the overfit check's one batch (``runners/training_step.py``,
        ``runners/overfit.py``)."""
        self.precision = Precision.of(self.step_settings.mixed_precision, self.device)
        self.one_batch = self._first_batch() if self.overfit is not None else None
        batches = self._epoch_batches()
        self.window = AccumulationWindow(self.step_settings.gradient_accumulation_steps,
                                         len(batches) if isinstance(batches, Sized) else None)
        if self.precision.dtype is not None or self.window.size > 1:
            self.logger.info(f"Training step: {self.precision.describe()}, an optimizer step every "
                             f"{self.window.size} batch(es)")
        if self.one_batch is not None:
            self.logger.info(f"Overfit check: each epoch trains {self.overfit.steps} steps on one batch (idx "
                             f"{idx_list(self.one_batch['meta_info']['idx'])[:8]}...)")

    def _first_batch(self) -> dict[str, Any]:
        """The first batch of epoch 0's order: the same one in a resumed run."""
        self._seed_sampler(0)
        return next(iter(self.train_dataloader))

    def _epoch_batches(self) -> Iterable[dict[str, Any]]:
        """What a training epoch iterates: the training set, or the overfit check's one batch again and again."""
        if self.one_batch is not None:
            return RepeatedBatch(self.one_batch, self.overfit.steps)
        return self.train_dataloader

    @property
    def optimizer_steps_per_epoch(self) -> Optional[int]:
        """Optimizer steps in a training epoch (None where the training loader has no length)."""
        return self.window.steps()

    def _load_checkpoint_(self) -> None:
        """Resume after the last finished epoch, if this work dir has one."""
        progress_path = os.path.join(self.work_dir, PROGRESS_FILE)
        if not os.path.exists(progress_path):
            return
        try:
            progress = read_json(progress_path)
            done = progress["completed_epochs"]
        except (ValueError, TypeError, KeyError) as exc:
            raise CheckpointError(f"{progress_path} is not a Lantern progress file ({type(exc).__name__}: {exc}); "
                                  "it was edited or damaged. Restore it, or delete the work dir to start over") from exc
        if done == 0:
            return
        path = self._epoch_path(done - 1, CHECKPOINT_FILE)
        checkpoint = load_checkpoint_file(path)
        load_model_state(self.eval_model, checkpoint["model_state_dict"], path)
        self.optimizer.load_state_dict(checkpoint["optimizer_state_dict"])
        if self.scheduler is not None and checkpoint.get("scheduler_state_dict") is not None:
            self.scheduler.load_state_dict(checkpoint["scheduler_state_dict"])
        if self.precision.scaler is not None and checkpoint.get("scaler_state_dict") is not None:
            self.precision.scaler.load_state_dict(checkpoint["scaler_state_dict"])
        self.cum_epochs = done
        self.best_epoch, self.best_score = progress.get("best_epoch"), progress.get("best_score")
        self.logger.info(f"Resuming after epoch {done - 1} from {path}")

    # ------------------------------------------------------------------ loop
    def run(self) -> None:
        self._init_components_()
        try:
            self._before_run()
            if self.cum_epochs >= self.tot_epochs:
                self.logger.info(f"All {self.tot_epochs} epochs are already done in {self.work_dir}")
            while self.cum_epochs < self.tot_epochs:
                self._train_epoch_()
                self._val_epoch_()
                self._save_checkpoint_()
                self.cum_epochs += 1
            self.hooks.call("after_run", self)
        finally:
            self._close()
        self.logger.info(f"Training done: results in {os.path.abspath(self.work_dir)}")

    def _epoch_path(self, epoch: int, *names: str) -> str:
        return os.path.join(self.work_dir, epoch_dir_name(epoch), *names)

    def _train_epoch_(self) -> None:
        epoch = self.cum_epochs
        self.stage = f"epoch {epoch} training"
        seed_everything(self.seed * 1000 + epoch + 1_000_003 * self.rank)  # per rank: dropout differs across ranks
        self._seed_sampler(epoch)
        self.model.train()
        self.window.begin_epoch()
        self.hooks.call("before_train_epoch", self, epoch)
        losses = []
        progress = Progress(self._epoch_batches(), f"train {epoch}", self.logger, self.is_main)
        for dp in progress:
            losses.append(self._train_step(dp))
            progress.note(loss=f"{losses[-1]:.3f}")
        if not self.window.starts:  # a loader without a length: its last window is shorter than announced
            self._step_window()
        self.hooks.call("after_train_epoch", self, epoch)
        if self.one_batch is not None and losses:
            memorised, line = verdict(self.overfit, losses, idx_list(self.one_batch["meta_info"]["idx"]))
            self.logger.log(logging.INFO if memorised else logging.WARNING, line)
        if self.scheduler is not None:
            self.scheduler.step()
        epoch_dir = self._epoch_path(epoch)
        self._check_work_dir(f"write the files of epoch {epoch}")
        write_run_file(epoch_dir, lambda: os.makedirs(epoch_dir, exist_ok=True))
        if self.is_main:
            path = self._epoch_path(epoch, TRAINING_LOSSES_FILE)
            write_run_file(path, lambda: atomic_torch_save(torch.tensor(losses), path))
        self.logger.info(f"epoch {epoch}: mean training loss {sum(losses) / max(len(losses), 1):.4f}")

    def _seed_sampler(self, epoch: int) -> None:
        """The training order of ``epoch``, from the run's seed."""
        sampler = self.train_dataloader.sampler
        if isinstance(sampler, DistributedSampler):
            sampler.set_epoch(epoch)
        else:
            sampler.generator.manual_seed(self.seed * 1000 + epoch)

    def _train_step(self, dp: dict[str, Any]) -> float:
        """One batch: its forward pass (under autocast with mixed precision) and backward pass, and the optimizer's
        step where the batch closes an accumulation window. Returns the batch's loss (the mean over ranks)."""
        dp = apply_tensor_op(lambda t: t.to(self.device, non_blocking=True), dp)
        with self.precision.autocast():
            outputs = self._forward(self.model, dp["inputs"])
            loss = self.criterion(outputs, dp["labels"])
        if not self._metric_checked:  # before the first step: a metric breaking its contract costs no epoch
            self._check_metric(outputs, dp["labels"])
        if self.window.starts:
            self.optimizer.zero_grad(set_to_none=True)
        ends = self.window.ends
        with self._gradient_sync(ends):
            self.precision.backward(loss / self.window.length)
        value = float(distributed.mean_across_ranks(loss.detach()))
        self.window.add(dp, loss, value)
        if ends:
            self._step_window()
        return value

    def _gradient_sync(self, ends_window: bool) -> AbstractContextManager:
        """DDP all-reduces the gradients on a window's last batch only."""
        if not ends_window and isinstance(self.model, torch.nn.parallel.DistributedDataParallel):
            return self.model.no_sync()
        return contextlib.nullcontext()

    def _step_window(self) -> None:
        batch, loss = self.window.close()
        self._optimizer_step(batch, loss, self.precision.scaler)

    def _optimizer_step(self, dp: dict[str, Any], loss: torch.Tensor,
                        scaler: torch.amp.GradScaler | None = None) -> None:
        """``optimizer.step()`` between the hooks' ``before_optimizer_step`` (the training monitor's checks: it may
        skip a non-finite step's update, or stop the run) and ``after_train_step``. With a ``GradScaler`` (mixed
        precision in float16, after ``scaler.scale(loss).backward()``) the gradients are unscaled before the hooks
        read them, the step is the scaler's, and its overflow steps are no NaN for the monitor. ``dp``: the batch
        that speaks for the step (of an accumulation window, the first with a non-finite loss, else the last)."""
        if scaler is not None:
            scaler.unscale_(self.optimizer)
        if self.hooks.before_optimizer_step(self, dp, loss, scaler):
            if scaler is not None:
                scaler.step(self.optimizer)  # skips a step whose gradients overflowed
            else:
                self.optimizer.step()
        if scaler is not None:
            scaler.update()
        self.hooks.call("after_train_step", self, dp)

    def _val_epoch_(self) -> None:
        epoch = self.cum_epochs
        self.stage = f"epoch {epoch} validation"
        dataset = self.val_dataloader.dataset
        if hasattr(dataset, "set_base_seed"):
            dataset.set_base_seed(self.seed)
        distributed.broadcast_buffers(self.eval_model)  # every rank validates the model rank 0 checkpoints
        eval_pass = EvalPass(self._epoch_path(epoch), dataset, epoch, full_outputs=epoch in self.checkpoint_indices)
        self.val_scores = self._eval_loop(self.val_dataloader, f"val {epoch}", eval_pass)
        if self.is_main:
            write_scores(self._epoch_path(epoch, VALIDATION_SCORES_FILE), self.val_scores)
        summary = ", ".join(f"{k} {v:.4f}" for k, v in self.val_scores["aggregated"].items())
        self.logger.info(f"epoch {epoch}: validation {summary}")

    # ----------------------------------------------------------- checkpoints
    def _save_checkpoint_(self) -> None:
        """Write this epoch's checkpoint, then mark the epoch done, then prune old checkpoints."""
        epoch = self.cum_epochs
        self.stage = f"epoch {epoch} checkpoint"
        self._update_best(epoch)
        self._check_work_dir(f"save the checkpoint of epoch {epoch} and mark it done")
        if self.is_main:
            checkpoint_path = self._epoch_path(epoch, CHECKPOINT_FILE)
            write_run_file(checkpoint_path, lambda: atomic_torch_save({
                "epoch": epoch,
                "model_state_dict": self.eval_model.state_dict(),
                "optimizer_state_dict": self.optimizer.state_dict(),
                "scheduler_state_dict": self.scheduler.state_dict() if self.scheduler is not None else None,
                "scaler_state_dict": scaler.state_dict() if (scaler := self.precision.scaler) is not None else None,
            }, checkpoint_path))
            progress_path = os.path.join(self.work_dir, PROGRESS_FILE)
            write_run_file(progress_path, lambda: atomic_write_json(progress_path, {
                "completed_epochs": epoch + 1, "tot_epochs": self.tot_epochs,
                "checkpoint_indices": self.checkpoint_indices,
                "best_epoch": self.best_epoch, "best_score": self.best_score,
                "best_metric": self._best_metric_name(),
            }))
            self._prune_checkpoints(epoch)
        self.hooks.call("after_epoch", self, epoch)
        distributed.barrier("waiting for rank 0 to save the checkpoint")

    def resume_advice(self) -> str:
        done = getattr(self, "cum_epochs", 0)  # set once the run reads its progress
        if not done:
            return "no epoch had finished: once fixed, the same command starts the run again in this work dir"
        done_epochs = "epoch 0 is" if done == 1 else f"epochs 0-{done - 1} are"
        return f"{done_epochs} done and saved: once fixed, the same command resumes after epoch {done - 1}"

    def _best_metric_name(self) -> str:
        return self.config.get("best_metric") or next(iter(self.val_scores["aggregated"]))

    def _update_best(self, epoch: int) -> None:
        name = self._best_metric_name()
        if name not in self.val_scores["aggregated"]:
            raise ConfigError(f"config['best_metric'] is {name!r}, but the metric reports "
                              f"{list(self.val_scores['aggregated'])}; pick one of those")
        score = self.val_scores["aggregated"][name]
        higher = self.val_scores.get("higher_is_better", {}).get(name, True)
        if math.isnan(score):  # a NaN epoch is never the best, and never blocks a later finite one
            return
        if self.best_score is None or (score > self.best_score if higher else score < self.best_score):
            self.best_epoch, self.best_score = epoch, score

    def _prune_checkpoints(self, latest: int) -> None:
        keep = set(self.checkpoint_indices) | {latest, self.best_epoch}
        for epoch in range(latest):
            path = self._epoch_path(epoch, CHECKPOINT_FILE)
            if epoch not in keep and os.path.exists(path):
                os.remove(path)

