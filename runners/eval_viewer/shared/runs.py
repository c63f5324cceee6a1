"""Find the runs under the folders given to the viewer and list their epochs.

A run is a folder holding a run info file: a trainer work dir (epoch folders with their scores and, at checkpoint
epochs, debug outputs) or an evaluator work dir (its scores and debug outputs in the run folder itself, shown as one
pseudo-epoch); ``run_dir`` lays them out. Listing only reads folder entries and small JSON files, so it costs the
same whatever the size of the debug pages.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional

from run_dir import EpochDir, RunDir
from run_dir.errors import RunFileError
from run_dir.names import (
    EVALUATION_SCORES_FILE,
    EVALUATOR_LOG,
    PROGRESS_FILE,
    RUN_INFO_FILE,
    RUNNER_LOG,
    TRAINER_LOG,
    VALIDATION_SCORES_FILE,
    epoch_dir_name,
)
from run_dir.run_files import MIB, read_run_json
from run_dir.run_log import last_log_line

EVALUATION_KEY = "evaluation"
MAX_SEARCH_DEPTH = 6  # a log folder deeper than this is almost certainly not a folder of runs
MAX_MODEL_REPORT_BYTES = 16 * MIB  # ~150 bytes per layer: 100,000 layers

EXPECTED_LAYOUT = (
    f"expected a Lantern run folder holding {RUN_INFO_FILE} (a trainer work dir: {RUN_INFO_FILE}, {PROGRESS_FILE}, "
    f"{epoch_dir_name('N')}/{VALIDATION_SCORES_FILE}; an evaluator work dir: {RUN_INFO_FILE}, "
    f"{EVALUATION_SCORES_FILE}), or a folder containing such runs"
)


@dataclass(frozen=True)
class Run:
    """One work dir; ``name`` is its path relative to the log dir it was found in."""

    path: str
    name: str
    runner: str
    config_filepath: Optional[str]

    @property
    def is_evaluator(self) -> bool:
        return "Evaluator" in self.runner or RunDir(self.path).is_evaluator


@dataclass(frozen=True)
class Epoch:
    """A trainer epoch, or an evaluator run's single pseudo-epoch (``key == 'evaluation'``)."""

    key: str
    label: str
    number: Optional[int]
    dir: str
    scores_path: Optional[str]
    has_debug: bool
    debug_removed: Optional[str] = None  # why its debug outputs are gone ("removed to stay under N GB"), if removed


@dataclass
class Discovery:
    """What the log dirs hold: runs by absolute path, and one message per argument that held none."""

    runs: dict[str, Run] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def discover_runs(log_dirs: list[str]) -> Discovery:
    """Runs in ``log_dirs`` (each a run or a folder of runs, nested up to ``MAX_SEARCH_DEPTH``)."""
    discovery = Discovery()
    for log_dir in log_dirs:
        if not os.path.isdir(log_dir):
            discovery.problems.append(f"{log_dir}: no such folder; pass an existing folder to --log-dirs")
            continue
        root = os.path.abspath(log_dir)
        found = [read_run(path, root, discovery.problems) for path in _run_folders(root)]
        discovery.runs.update((run.path, run) for run in found if run is not None)
        if not found:
            discovery.problems.append(f"{log_dir} holds no Lantern run: {EXPECTED_LAYOUT}")
    return discovery


def _run_folders(root: str) -> list[str]:
    """Folders holding a run info file; the search does not descend into a run (its epochs hold no runs)."""
    if os.path.isfile(os.path.join(root, RUN_INFO_FILE)):
        return [root]
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        if RUN_INFO_FILE in filenames:
            found.append(dirpath)
            dirnames.clear()
        elif dirpath[len(root):].count(os.sep) >= MAX_SEARCH_DEPTH:
            dirnames.clear()
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
    return found


def read_run(path: str, root: str, problems: list[str]) -> Optional[Run]:
    """The run in ``path`` (named relative to ``root``), or None with the reason added to ``problems``."""
    folder = RunDir(path)
    info_path = folder.info
    try:
        info = folder.read_info()
    except (OSError, ValueError) as exc:
        problems.append(f"{info_path} cannot be read ({exc}); the run is skipped. Rerun it or delete the folder")
        return None
    if not isinstance(info, dict):
        problems.append(f"{info_path} is not a JSON object; the run is skipped. Rerun it or delete the folder")
        return None
    problems.extend(folder.link_problems())
    name = os.path.relpath(path, os.path.dirname(root))
    config = info.get("config_filepath")
    return Run(path, name, str(info.get("runner", "")), config if isinstance(config, str) else None)


def is_finished(run: Run) -> bool:
    """Whether the run is done writing: an evaluator's scores are there, or a trainer's progress file counts
    every epoch done (a run at its first epoch, or stopped, is not). A progress file that cannot be read says no."""
    if run.is_evaluator:
        return os.path.isfile(RunDir(run.path).evaluation.scores)
    try:
        progress = RunDir(run.path).read_progress()
    except (OSError, ValueError):
        return False
    done, total = (progress.get(key) if isinstance(progress, dict) else None for key in ("completed_epochs",
                                                                                          "tot_epochs"))
    return isinstance(done, int) and isinstance(total, int) and 0 < total <= done


def unfinished_reason(run: Run) -> Optional[str]:
    """Why a run has nothing to show, when it never finished an epoch (a trainer without a progress file) or an
    evaluation (no scores): its log's last line (the stop's reason, or what it is doing while it still runs); None
    for a run that finished some work."""
    folder = RunDir(run.path)
    if os.path.isfile(folder.progress) or os.path.isfile(folder.evaluation.scores):
        return None
    for name in (TRAINER_LOG, EVALUATOR_LOG, RUNNER_LOG):
        line = last_log_line(folder.file(name))
        if line is not None:
            return line
    return "it wrote no log"


def last_modified(run: Run) -> float:
    """When the run last wrote something: the newest time among its folder and the entries in it."""
    times = [os.stat(run.path).st_mtime] if os.path.isdir(run.path) else [0.0]
    for entry in _listdir(run.path):
        try:
            times.append(os.stat(os.path.join(run.path, entry)).st_mtime)
        except OSError:
            continue
    return max(times)


def list_epochs(run: Run) -> list[Epoch]:
    """The run's epochs with scores or debug outputs, oldest first (re-read on every call)."""
    folder = RunDir(run.path)
    if run.is_evaluator:
        return [_epoch(EVALUATION_KEY, "evaluation", folder.evaluation)]
    epochs = [_epoch(epoch_dir_name(number), f"epoch {number}", folder.epoch(number))
              for number in folder.epochs()]  # a linked epoch folder is never followed (discovery says why)
    return [epoch for epoch in epochs if epoch.scores_path or epoch.has_debug]


def _epoch(key: str, label: str, folder: EpochDir) -> Epoch:
    scores = folder.scores
    has_debug = folder.has_debug_outputs
    return Epoch(key, label, folder.number, folder.path, scores if os.path.lexists(scores) else None, has_debug,
                 None if has_debug else folder.removal_reason())


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def read_model_report(run_dir: str) -> Optional[dict[str, Any]]:
    """``model_report.json`` of the run in ``run_dir``, None when it has none; ``RunFileError`` (a ValueError)
    when it is not a model report: not a regular file, not JSON, or not shaped as ``debuggers.model_report``
    writes it (a drawing of it would fail on the first odd field)."""
    path = RunDir(run_dir).model_report
    if not os.path.lexists(path):
        return None
    report = read_run_json(path, "model report", MAX_MODEL_REPORT_BYTES)
    layers = report.get("layers", []) if isinstance(report, dict) else None
    if not isinstance(report, dict) or not isinstance(report.get("parameters", {}), dict) \
            or not isinstance(layers, list) or not all(isinstance(layer, dict) for layer in layers):
        raise RunFileError(f"{path} is not a Lantern model report (expected a JSON object with a 'parameters' "
                           "object and a 'layers' list of objects); remove it or rerun to rewrite it")
    return report
