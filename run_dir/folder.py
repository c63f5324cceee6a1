"""``RunDir`` and ``EpochDir``: where each file of a run lies, which epochs a run has and what each holds, and the
one rule for the epoch to use when none is given.

Epoch folders are found by their names; a linked one is never followed (a run folder may come from anyone, and a
link can lead anywhere): the listing leaves it out, and ``RunDir.link_problems`` says why.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple, Optional

from run_dir.errors import EpochNotFoundError, RunFileError
from run_dir.names import (
    CHECKPOINT_FILE,
    DATAPOINTS_DIR,
    DEBUGGER_DIR,
    EMBEDDINGS_DIR,
    EPOCH_TABLE_FILE,
    EVALUATION_SCORES_FILE,
    FINDINGS_FILE,
    LOCK_FILE,
    MODEL_REPORT_FILE,
    MONITOR_FILE,
    PROFILER_SUMMARY_FILE,
    PROFILER_TRACE_FILE,
    PROGRESS_FILE,
    REMOVED_MARKER,
    RUN_INFO_FILE,
    TAGS_FILE,
    TAGS_LOCK_FILE,
    TENSORBOARD_DIR,
    TRAINING_LOSSES_FILE,
    VALIDATION_SCORES_FILE,
    epoch_dir_name,
    epoch_number,
)
from run_dir.run_files import MIB, link_problem, read_run_json, removal_reason

MAX_RUN_INFO_BYTES = MIB  # run_info.json holds the config as written: a few KiB, a long class list included
MAX_PROGRESS_BYTES = MIB


class _Sought(NamedTuple):
    """How a lookup says that no epoch holds what it seeks (``str.format`` with path, epoch, epochs)."""

    none: str
    missing: str


_SOUGHT = {
    EPOCH_TABLE_FILE: _Sought(
        none=f"{{path}} holds no epoch table ({EPOCH_TABLE_FILE}): train or evaluate it first with this version of "
             "Lantern",
        missing="{path} has no epoch table for epoch {epoch}; epochs with one: {epochs}"),
    DEBUGGER_DIR: _Sought(
        none=f"{{path!r}} holds no debug outputs (no {DEBUGGER_DIR}/ or {epoch_dir_name('N')}/{DEBUGGER_DIR}/ "
             "folder); configure a debugger and run a checkpoint epoch first",
        missing="epoch {epoch} of {path!r} has no debug outputs; epochs with debug outputs: {epochs}"),
}


class EpochDir:
    """One epoch's folder: a trainer's ``epoch_N``, or an evaluator's run folder (its only epoch, ``number`` None)."""

    def __init__(self, path: str, number: Optional[int] = None) -> None:
        self.path = path
        self.number = number

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    @property
    def scores(self) -> str:
        return self.file(VALIDATION_SCORES_FILE if self.number is not None else EVALUATION_SCORES_FILE)

    @property
    def table(self) -> str:
        return self.file(EPOCH_TABLE_FILE)

    @property
    def findings(self) -> str:
        return self.file(FINDINGS_FILE)

    @property
    def debugger(self) -> str:
        return self.file(DEBUGGER_DIR)

    @property
    def checkpoint(self) -> str:
        return self.file(CHECKPOINT_FILE)

    @property
    def training_losses(self) -> str:
        return self.file(TRAINING_LOSSES_FILE)

    @property
    def removed_marker(self) -> str:
        return self.file(REMOVED_MARKER)

    @property
    def embeddings(self) -> str:
        return self.file(EMBEDDINGS_DIR)

    def holds(self, name: str) -> bool:
        return os.path.exists(self.file(name))

    @property
    def has_debug_outputs(self) -> bool:
        """Whether its pages' folder is there (a link is refused when the pages are opened, saying why)."""
        return os.path.isdir(self.debugger)

    def removal_reason(self) -> Optional[str]:
        """Why its debug outputs are gone ("removed to stay under N GB"), None unless the disk budget removed them."""
        return removal_reason(self.path)


def run_of(epoch_dir: str) -> str:
    """The run folder an epoch's folder belongs to: a trainer's ``epoch_N`` folder's run, else the folder itself
    (an evaluator's run is its only epoch)."""
    folder = os.path.normpath(epoch_dir)
    parent = os.path.dirname(folder)
    if epoch_number(os.path.basename(folder)) is not None and os.path.isfile(os.path.join(parent, RUN_INFO_FILE)):
        return parent
    return epoch_dir


class RunDir:
    """A run's folder: a trainer's work dir (``epoch_N`` folders) or an evaluator's (its files in the folder itself).

    It reads nothing when made: each property is a path, each method reads only folder entries or small files.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    @property
    def info(self) -> str:
        return self.file(RUN_INFO_FILE)

    @property
    def progress(self) -> str:
        return self.file(PROGRESS_FILE)

    @property
    def lock(self) -> str:
        return self.file(LOCK_FILE)

    @property
    def datapoints(self) -> str:
        return self.file(DATAPOINTS_DIR)

    @property
    def monitor(self) -> str:
        return self.file(MONITOR_FILE)

    @property
    def model_report(self) -> str:
        return self.file(MODEL_REPORT_FILE)

    @property
    def tags(self) -> str:
        return self.file(TAGS_FILE)

    @property
    def tags_lock(self) -> str:
        return self.file(TAGS_LOCK_FILE)

    @property
    def tensorboard(self) -> str:
        return self.file(TENSORBOARD_DIR)

    @property
    def profiler_trace(self) -> str:
        return self.file(PROFILER_TRACE_FILE)

    @property
    def profiler_summary(self) -> str:
        return self.file(PROFILER_SUMMARY_FILE)

    @property
    def is_evaluator(self) -> bool:
        """An evaluator's run once it wrote its scores (the run's ``run_info.json`` names its runner before)."""
        return os.path.isfile(self.evaluation.scores)

    @property
    def evaluation(self) -> EpochDir:
        """An evaluator's only epoch: the run folder itself."""
        return EpochDir(self.path)

    def epoch(self, number: int) -> EpochDir:
        return EpochDir(self.file(epoch_dir_name(number)), number)

    def epochs(self) -> list[int]:
        """The numbers of its ``epoch_N`` folders, in order; linked ones are left out."""
        return sorted(number for name in self._entries() if (number := epoch_number(name)) is not None
                      and os.path.isdir(path := self.file(name)) and not os.path.islink(path))

    def epochs_holding(self, name: str) -> list[int]:
        """The epochs whose folder holds ``name`` (``EPOCH_TABLE_FILE``, ``DEBUGGER_DIR``, ``CHECKPOINT_FILE``...)."""
        return [number for number in self.epochs() if self.epoch(number).holds(name)]

    def link_problems(self) -> list[str]:
        """Why each linked epoch folder is not read."""
        return [problem for name in sorted(self._entries()) if epoch_number(name) is not None
                and (problem := link_problem(self.file(name), "epoch folder"))]

    def epoch_dir(self, epoch: Optional[int] = None, holding: str = EPOCH_TABLE_FILE) -> str:
        """The folder of ``epoch`` holding ``holding`` (``EPOCH_TABLE_FILE`` or ``DEBUGGER_DIR``): the run folder
        itself where it holds it (an evaluator's, or an ``epoch_N`` folder given as the run), else ``epoch_N``.

        With no epoch given, the latest epoch holding it, preferring one whose debug outputs were captured: the
        one whose findings can draw on the model's internals. ``EpochNotFoundError`` says which epochs hold it;
        ``RunFileError`` names a linked epoch folder, which is never followed."""
        sought = _SOUGHT[holding]
        if not os.path.isdir(self.path):
            missing = "is not a folder" if os.path.exists(self.path) else "does not exist"
            raise EpochNotFoundError(f"run dir {self.path!r} {missing}; pass a trainer's or an evaluator's work dir "
                                     "(e.g. logs/examples/cnn_trainer) to --run")
        if self.evaluation.holds(holding) and (epoch is None or epoch_number(self._name) == epoch):
            return self.path
        linked = self.link_problems()
        if linked:
            raise RunFileError(linked[0])
        epochs = self.epochs_holding(holding)
        if not epochs:
            raise EpochNotFoundError(self._runs_inside(holding) or sought.none.format(path=self.path))
        if epoch is not None and epoch not in epochs:
            raise EpochNotFoundError(sought.missing.format(path=self.path, epoch=epoch, epochs=epochs))
        captured = [number for number in epochs if self.epoch(number).has_debug_outputs]
        return self.epoch(epoch if epoch is not None else (captured or epochs)[-1]).path

    def read_info(self) -> Any:
        """``run_info.json`` as JSON; ``RunFileError`` when it is not a file Lantern writes there."""
        return read_run_json(self.info, "run info file", MAX_RUN_INFO_BYTES)

    def read_progress(self) -> Any:
        """``progress.json`` as JSON; ``RunFileError`` when it is not a file Lantern writes there."""
        return read_run_json(self.progress, "progress file", MAX_PROGRESS_BYTES)

    @property
    def _name(self) -> str:
        return os.path.basename(os.path.normpath(self.path))

    def _entries(self) -> list[str]:
        try:
            return os.listdir(self.path)
        except OSError:
            return []

    def _runs_inside(self, holding: str) -> Optional[str]:
        """Where the folder holds runs instead of being one: which, and that one of them is to be passed."""
        runs = sorted(name for name in self._entries() if os.path.isdir(self.file(name))
                      and (RunDir(self.file(name)).evaluation.holds(holding)
                           or RunDir(self.file(name)).epochs_holding(holding)))
        if not runs:
            return None
        return (f"{self.path} is a folder of runs, not a run: pass one of them to --run, e.g. "
                f"{self.file(runs[0])} (runs here: {', '.join(runs[:20])})")
