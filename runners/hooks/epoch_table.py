"""The epoch table hook: one row per evaluated datapoint, written beside the pass's other outputs
(``analysis/epoch_table.py``), with the debugger's summaries where it ran and the run's failure definition."""

from __future__ import annotations

import os
from typing import Any, Optional

from analysis.epoch_rows import EpochRows, gather_epoch_columns
from analysis.epoch_table import write_epoch_table
from run_dir.names import EPOCH_TABLE_FILE
from runners.failure_definition import FAILURE_DEFINITION_ROLE, FailureDefinitionSettings
from runners.hooks.base import EvalPass, Runner, RunnerHook
from runners.run_writes import write_run_file


class EpochTableHook(RunnerHook):
    """Collects each batch's rows on every rank; rank 0 writes the table of every rank's rows. Comes before the
    debugger hook: the debugger's summaries are read before it is disabled."""

    def __init__(self, failure_definition: Optional[FailureDefinitionSettings]) -> None:
        self.failure_definition = failure_definition
        self._role: Optional[dict[str, Any]] = None  # the definition as the tables keep it
        self._rows: Optional[EpochRows] = None

    def before_run(self, runner: Runner) -> None:
        if self.failure_definition is not None:
            self._role = self.failure_definition.role(runner.metric)

    def before_eval_epoch(self, runner: Runner, eval_pass: EvalPass) -> None:
        self._rows = EpochRows.for_metric(runner.metric)

    def after_eval_batch(self, runner: Runner, batch: dict[str, Any]) -> None:
        self._rows.add_batch(batch)

    def after_eval_epoch(self, runner: Runner, eval_pass: EvalPass, scores: dict[str, Any]) -> None:
        debugger = runner.debugger
        summaries = debugger.summaries if debugger is not None and debugger.enabled else None
        dataset = eval_pass.dataset
        class_names = getattr(dataset, "class_names", None) or getattr(dataset, "CLASS_NAMES", None)
        gathered = gather_epoch_columns(scores, self._rows, summaries, class_names, runner.is_main)
        self._rows = None
        if gathered is not None:
            if self._role is not None:
                gathered[1][FAILURE_DEFINITION_ROLE] = self._role
            path = os.path.join(eval_pass.dir, EPOCH_TABLE_FILE)
            write_run_file(path, lambda: write_epoch_table(path, *gathered))
