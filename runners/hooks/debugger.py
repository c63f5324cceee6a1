"""The debugger hook: drives the config's ``SequentialDebugger`` (``runner.debugger``) through a run.

At start-up it registers the debugger's hooks on the model (an unknown layer name stops the run there) and writes
the model report; for each pass it captures (every evaluation, a trainer's checkpoint epochs, and every validation
epoch's summaries with ``summaries_every_epoch``) it empties the pass's ``debugger/`` folder and enables the
debugger; the model's forward passes run inside its watch; each batch goes through it; at the pass's end its last
pages are written and it is disabled, so training and the passes it skips see no hook; at the end it is closed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from contextlib import AbstractContextManager
from typing import Any

from debuggers.model_report import build_model_report, refresh_conv_filters, write_model_report
from run_dir.names import DEBUGGER_DIR, MODEL_REPORT_FILE
from runners.hooks.base import EvalPass, Runner, RunnerHook, Trainer
from utils import distributed
from utils.ops import apply_tensor_op, idx_list


class DebuggerHook(RunnerHook):
    """Does nothing where the config has no debugger."""

    def __init__(self) -> None:
        self._first_batch = False  # of the pass: its scores check the capture policy's score names

    def before_run(self, runner: Runner) -> None:
        debugger = runner.debugger
        if debugger is None:
            return
        debugger.register_hooks(runner.eval_model, logger=runner.logger)
        debugger.capture_policy.use_metric_directions(getattr(runner.metric, "HIGHER_IS_BETTER", {}))
        runner.logger.info(f"Debugger ready: {list(debugger.debuggers)}; full outputs kept: "
                           f"{debugger.capture_policy.describe()}")
        _write_model_report(runner)

    def before_eval_epoch(self, runner: Runner, eval_pass: EvalPass) -> None:
        """Enable the debugger for the pass, writing pages into an emptied ``debugger/`` (where the pass keeps no
        full outputs, it collects only the summaries, and writes no page)."""
        self._first_batch = True
        debugger = runner.debugger
        if debugger is None or not (eval_pass.full_outputs or debugger.summaries_every_epoch):
            return
        folder = os.path.join(eval_pass.dir, DEBUGGER_DIR)
        if runner.is_main and os.path.isdir(folder):
            shutil.rmtree(folder)
        distributed.barrier()
        debugger.reset_buffer(folder, full_outputs=eval_pass.full_outputs)
        debugger.enabled = True
        if eval_pass.epoch is not None:
            runner.logger.info(f"Debugger enabled for epoch {eval_pass.epoch}"
                               + ("" if eval_pass.full_outputs else " (summaries only: not a checkpoint epoch)"))

    def eval_forward(self, runner: Runner, batch: dict[str, Any]) -> AbstractContextManager:
        """The forward debuggers' hooks run in the debugger's watch: a hook that hangs is interrupted."""
        debugger = runner.debugger
        return debugger.watch_forward() if debugger is not None and debugger.enabled else contextlib.nullcontext()

    def after_eval_batch(self, runner: Runner, batch: dict[str, Any]) -> None:
        """The batch's outputs, with its ``scores``: the capture policy decides from them whose outputs to keep."""
        debugger = runner.debugger
        if debugger is None:
            return
        if self._first_batch:  # a keep score name the metric does not give stops the run here
            debugger.capture_policy.check_scores(batch["scores"], len(idx_list(batch["meta_info"]["idx"])))
            self._first_batch = False
        if debugger.enabled:
            batch["debug"] = debugger(batch, runner.eval_model)

    def after_eval_epoch(self, runner: Runner, eval_pass: EvalPass, scores: dict[str, Any]) -> None:
        """Write the last pages and disable the debugger; return once every rank has, so a pass's outputs are
        complete before it counts as done."""
        debugger = runner.debugger
        if debugger is None or not debugger.enabled:
            return
        folder = os.path.join(eval_pass.dir, DEBUGGER_DIR)
        full_outputs = debugger.full_outputs
        summary = debugger.save_all(folder)
        debugger.enabled = False
        if "error" in summary:
            runner.logger.error(f"Debug outputs in {folder} are incomplete: {summary['error']}")
        if full_outputs:  # every rank's pages: rank 0 writes only its share under torchrun
            parts = distributed.gather_objects([summary[key] for key in ("datapoints", "pages", "bytes")])
            datapoints, pages, size = (sum(values) for values in zip(*parts))
            runner.logger.info(f"Debug outputs: {datapoints} datapoints in {pages} page(s), {size / 2**20:.1f} MB "
                               f"in {folder}")
        distributed.barrier("waiting for every rank to write its debug pages")

    def after_epoch(self, runner: Trainer, epoch: int) -> None:
        _refresh_model_report(runner, f"epoch {epoch}")

    def close(self, runner: Runner) -> None:
        if runner.debugger is not None:
            runner.debugger.close()


def _write_model_report(runner: Runner) -> None:
    """Parameters and FLOPs of the model, once per run (rank 0), on the first eval datapoint (collated at
    start-up); never fatal."""
    path = os.path.join(runner.work_dir, MODEL_REPORT_FILE)
    if not runner.is_main or os.path.exists(path):
        return
    if runner.first_eval_batch is None:
        runner.logger.warning(f"model report not written: config['{runner.EVAL_DATASET_KEY}'] has no datapoint 0 to "
                              "measure the model on (an IterableDataset, an empty one, or batch_size=None)")
        return
    try:
        inputs = apply_tensor_op(lambda t: t.to(runner.device), runner.first_eval_batch["inputs"])
        write_model_report(path, build_model_report(runner.eval_model, inputs))
    except Exception as exc:  # the report only informs; the run must not stop for it
        runner.logger.warning(f"model report not written ({type(exc).__name__}: {exc})")


def _refresh_model_report(runner: Runner, taken_at: str) -> None:
    """The model report's conv filters as the weights are now (rank 0, where a report was written); never fatal."""
    path = os.path.join(runner.work_dir, MODEL_REPORT_FILE)
    if not runner.is_main or not os.path.isfile(path):
        return
    try:
        refresh_conv_filters(path, runner.eval_model, taken_at)
    except Exception as exc:  # the report only informs; the run must not stop for it
        runner.logger.warning(f"model report's conv filters not refreshed ({type(exc).__name__}: {exc})")
