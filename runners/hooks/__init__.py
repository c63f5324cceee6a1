"""The runner's hooks: everything that observes a run, the built-in observers and a user's own.

A hook subclasses ``RunnerHook`` and overrides the calls it needs (each does nothing otherwise). A trainer calls::

    before_run                      components built, checkpoint loaded
    for each epoch left:
        before_train_epoch
        for each training batch:
            before_optimizer_step   after loss.backward(); a False from any hook skips the update
            after_train_step        after optimizer.step()
        after_train_epoch           before the scheduler steps
        before_eval_epoch           the validation pass (an ``EvalPass``)
        for each validation batch:
            before_eval_batch       the batch as loaded
            eval_forward            the context the model's forward pass runs in
            after_eval_batch        the batch with its outputs and scores
        after_eval_epoch            the pass's scores; its scores file is written next
        after_epoch                 checkpoint and progress.json written: the epoch is done
    after_run
    close                           always, even after an error

An evaluator calls ``before_run``, one pass (``before_eval_epoch`` ... ``after_eval_epoch``), ``after_run`` and
``close``. ``before_optimizer_step`` and ``after_train_step`` are called by ``BaseTrainer._optimizer_step``, which a
trainer subclass's own ``_train_step`` calls too.

Each call goes to every hook in order: the built-in ones, then the config's own (``'hooks': [{'class': MyHook,
'args': {...}}]``). The built-in order matters where one reads another's work: the epoch table reads the debugger's
summaries before the debugger hook disables it, and the findings read the table and the debug pages::

    EpochTableHook, DatapointCaptureHook, DebuggerHook, FindingsHook, and for a trainer DiskBudgetHook,
    TrainingMonitorHook, ProfilerHook

Every rank calls every hook; a hook writing a file alone checks ``runner.is_main``.
"""

from runners.hooks.base import EvalPass, Hooks, Runner, RunnerHook, Trainer
from runners.hooks.datapoint_capture import DatapointCaptureHook
from runners.hooks.debugger import DebuggerHook
from runners.hooks.disk_budget import DiskBudgetHook, DiskBudgetSettings
from runners.hooks.epoch_table import EpochTableHook
from runners.hooks.findings import FindingsHook, FindingsSettings
from runners.hooks.profiler import ProfilerHook, ProfilerSettings
from runners.hooks.training_monitor import TrainingMonitorHook

__all__ = ["DatapointCaptureHook", "DebuggerHook", "DiskBudgetHook", "DiskBudgetSettings", "EpochTableHook", "EvalPass",
           "FindingsHook", "FindingsSettings", "Hooks", "ProfilerHook", "ProfilerSettings", "Runner", "RunnerHook",
           "Trainer", "TrainingMonitorHook"]
