"""``RunnerHook``, the base of everything that observes a run, and ``Hooks``, which calls a runner's hooks in order.

The order of the calls is in ``runners/hooks/__init__.py``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Optional, Protocol

import torch
from torch.utils.data import DataLoader

from debuggers.wrappers.sequential_debugger import SequentialDebugger


class Runner(Protocol):
    """What a hook may read of the runner calling it (``runners.base_runner.BaseRunner``)."""

    EVAL_DATASET_KEY: str  # the config key of the dataset evaluated
    config: dict[str, Any]
    work_dir: str
    logger: logging.Logger
    rank: int
    world_size: int
    device: torch.device
    metric: Any
    debugger: Optional[SequentialDebugger]  # the config's, built at start-up
    first_eval_batch: Any  # dataset[0] of the evaluated dataset, collated at start-up; during before_run only

    @property
    def is_main(self) -> bool: ...

    @property
    def eval_model(self) -> torch.nn.Module: ...


class Trainer(Runner, Protocol):
    """What a hook of a trainer may read besides (``runners.trainers.BaseTrainer``)."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    train_dataloader: DataLoader
    cum_epochs: int  # the epochs finished: the epoch running now
    tot_epochs: int

    @property
    def optimizer_steps_per_epoch(self) -> Optional[int]: ...


@dataclass(frozen=True)
class EvalPass:
    """One pass over the evaluated dataset: a trainer's validation of ``epoch``, or an evaluation (``epoch`` None)."""

    dir: str  # the folder of its outputs: the trainer's ``epoch_N/``, the evaluator's work dir
    dataset: Any
    epoch: Optional[int] = None
    full_outputs: bool = True  # the debugger keeps its full outputs: a trainer's checkpoint epoch, every evaluation


class RunnerHook:
    """Called by the runner at each point of a run; every method does nothing until overridden. ``runner`` is the
    runner calling (``Runner``, a trainer's ``Trainer``); ``batch`` a collated datapoint dict."""

    def before_run(self, runner: Runner) -> None:
        """The runner's components are built (a trainer's checkpoint loaded); nothing is trained or evaluated."""

    def before_train_epoch(self, runner: Trainer, epoch: int) -> None:
        """The model is in training mode; the epoch's first batch comes next."""

    def before_optimizer_step(self, runner: Trainer, batch: dict[str, Any], loss: torch.Tensor,
                              scaler: Optional[torch.amp.GradScaler]) -> bool:
        """After ``loss.backward()`` (the gradients unscaled where a ``GradScaler`` is used); return False to skip
        this step's update."""
        return True

    def after_train_step(self, runner: Trainer, batch: dict[str, Any]) -> None:
        """After ``optimizer.step()``, or where a skipped update would have been."""

    def after_train_epoch(self, runner: Trainer, epoch: int) -> None:
        """The epoch's last step is done; the scheduler has not stepped yet."""

    def before_eval_epoch(self, runner: Runner, eval_pass: EvalPass) -> None:
        """The model is in evaluation mode; the pass's first batch comes next."""

    def before_eval_batch(self, runner: Runner, batch: dict[str, Any]) -> None:
        """The batch as the dataloader gives it, before it is moved to the device."""

    def eval_forward(self, runner: Runner, batch: dict[str, Any]) -> AbstractContextManager:
        """A context the model's forward pass on ``batch`` runs in."""
        return contextlib.nullcontext()

    def after_eval_batch(self, runner: Runner, batch: dict[str, Any]) -> None:
        """The batch on the device with its ``outputs`` and per-datapoint ``scores``, added to the metric's buffer."""

    def after_eval_epoch(self, runner: Runner, eval_pass: EvalPass, scores: dict[str, Any]) -> None:
        """Every batch of the pass is done on every rank; ``scores`` are every rank's, summarized. The scores file
        is written once every hook has returned."""

    def after_epoch(self, runner: Trainer, epoch: int) -> None:
        """A trainer's epoch is done: its checkpoint and ``progress.json`` are written (rank 0)."""

    def after_run(self, runner: Runner) -> None:
        """The run has done all its work."""

    def close(self, runner: Runner) -> None:
        """The run ends, done or stopped by an error: release what the hook holds. Called even where
        ``before_run`` was not."""


class Hooks:
    """A runner's hooks, each call made on every hook in order. Only the hooks that override a method are called
    for it, so a method no hook uses costs nothing per batch."""

    def __init__(self, hooks: Sequence[RunnerHook]) -> None:
        self.hooks = tuple(hooks)
        self._methods = {name: [getattr(hook, name) for hook in self.hooks
                                if getattr(type(hook), name) is not getattr(RunnerHook, name)]
                         for name in vars(RunnerHook) if not name.startswith("_")}

    def call(self, name: str, *args: Any) -> None:
        """``hook.<name>(*args)`` for every hook, in order."""
        for method in self._methods[name]:
            method(*args)

    def before_optimizer_step(self, *args: Any) -> bool:
        """Every hook is asked; the step's update is applied unless one of them says no."""
        return all([method(*args) for method in self._methods["before_optimizer_step"]])

    def eval_forward(self, runner: Runner, batch: dict[str, Any]) -> AbstractContextManager:
        """Every hook's context around the forward pass, the first outermost."""
        methods = self._methods["eval_forward"]
        if len(methods) < 2:  # one context needs no stack around it (a call per batch)
            return methods[0](runner, batch) if methods else contextlib.nullcontext()
        with contextlib.ExitStack() as stack:  # a context failing to enter exits those entered before it
            for method in methods:
                stack.enter_context(method(runner, batch))
            return stack.pop_all()

    def close(self, runner: Runner) -> None:
        """Every hook's ``close``, even after one raised; the first error is raised once all are called."""
        errors = []
        for method in self._methods["close"]:
            try:
                method(runner)
            except Exception as exc:  # the other hooks must still release what they hold
                errors.append(exc)
        if errors:
            raise errors[0]
