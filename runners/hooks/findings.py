"""The findings hook: each pass's failures analysed in the background once its table and debug outputs are written,
and stored beside them for the viewer's Failures tab (``runners/findings_worker.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from runners.findings_worker import BackgroundFindings
from runners.hooks.base import EvalPass, Runner, RunnerHook
from utils.settings import BOOLEAN, Settings, setting


@dataclass(frozen=True)
class FindingsSettings(Settings):
    """``config['failure_analysis']``, the findings hook's setting."""

    failure_analysis: bool = setting(
        True, BOOLEAN, "analyse each validation epoch's failures (and an evaluation's) in the background, for the "
                       "viewer's Failures tab; False: the tab computes them when opened",
        identifies_run=False, see="[analysis.md](analysis.md#findings-stored-after-each-validation-epoch)")


class FindingsHook(RunnerHook):
    """Rank 0 hands each pass's folder to ``BackgroundFindings`` (started at the first); comes after the epoch table
    and debugger hooks, whose outputs the analysis reads. At the end, the last analysis is waited for a while."""

    def __init__(self, settings: FindingsSettings) -> None:
        self.settings = settings
        self._findings: Optional[BackgroundFindings] = None

    def after_eval_epoch(self, runner: Runner, eval_pass: EvalPass, scores: dict[str, Any]) -> None:
        if not runner.is_main or not self.settings.failure_analysis:
            return
        if self._findings is None:
            self._findings = BackgroundFindings(runner.logger)
        self._findings.submit(eval_pass.dir)

    def close(self, runner: Runner) -> None:
        if self._findings is not None:
            self._findings.close()
