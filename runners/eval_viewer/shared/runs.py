"""Find the runs under the folders given to the viewer and list their epochs.

A run is a folder holding ``run_info.json``: a trainer work dir (``epoch_N/``
folders with ``validation_scores.json`` and, at checkpoint epochs, ``debugger/``)
or an evaluator work dir (``evaluation_scores.json`` and ``debugger/`` in the run
folder itself, shown as one pseudo-epoch). Listing only reads folder entries and
small JSON files, so it costs the same whatever the size of the debug pages.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from debuggers.model_report import MODEL_REPORT_FILE
from debuggers.pages.reader import DEBUGGER_DIR
from debuggers.pages.run_files import MIB, RunFileError, link_problem, read_run_json, removal_reason

RUN_INFO_FILE = "run_info.json"
TRAINER_SCORES = "validation_scores.json"
EVALUATOR_SCORES = "evaluation_scores.json"
EVALUATION_KEY = "evaluation"
PROGRESS_FILE = "progress.json"  # a trainer's epochs done (runners/trainers/base_trainer.py writes it)
MAX_PROGRESS_BYTES = MIB
MAX_SEARCH_DEPTH = 6  # a log folder deeper than this is almost certainly not a folder of runs
MAX_RUN_INFO_BYTES = MIB  # run_info.json holds the config as written: a few KiB, a long class list included
MAX_MODEL_REPORT_BYTES = 16 * MIB  # ~150 bytes per layer: 100,000 layers
_EPOCH_DIR = re.compile(r"epoch_(\d+)")

EXPECTED_LAYOUT = (
    "expected a Lantern run folder holding run_info.json (a trainer work dir: run_info.json, progress.json, "
    "epoch_N/validation_scores.json; an evaluator work dir: run_info.json, evaluation_scores.json), "
    "or a folder containing such runs"
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
        return "Evaluator" in self.runner or os.path.isfile(os.path.join(self.path, EVALUATOR_SCORES))


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
    """Folders holding run_info.json; the search does not descend into a run (its epochs hold no runs)."""
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
    info_path = os.path.join(path, RUN_INFO_FILE)
    try:
        info = read_run_json(info_path, "run info file", MAX_RUN_INFO_BYTES)
    except (OSError, ValueError) as exc:
        problems.append(f"{info_path} cannot be read ({exc}); the run is skipped. Rerun it or delete the folder")
        return None
    if not isinstance(info, dict):
        problems.append(f"{info_path} is not a JSON object; the run is skipped. Rerun it or delete the folder")
        return None
    problems.extend(problem for entry in sorted(_listdir(path)) if _EPOCH_DIR.fullmatch(entry)
                    and (problem := link_problem(os.path.join(path, entry), "epoch folder")))
    name = os.path.relpath(path, os.path.dirname(root))
    config = info.get("config_filepath")
    return Run(path, name, str(info.get("runner", "")), config if isinstance(config, str) else None)


def is_finished(run: Run) -> bool:
    """Whether the run is done writing: an evaluator's scores are there, or a trainer's ``progress.json`` counts
    every epoch done (a run at its first epoch, or stopped, is not). A progress file that cannot be read says no."""
    if run.is_evaluator:
        return os.path.isfile(os.path.join(run.path, EVALUATOR_SCORES))
    try:
        progress = read_run_json(os.path.join(run.path, PROGRESS_FILE), "progress file", MAX_PROGRESS_BYTES)
    except (OSError, ValueError):
        return False
    done, total = (progress.get(key) if isinstance(progress, dict) else None for key in ("completed_epochs",
                                                                                          "tot_epochs"))
    return isinstance(done, int) and isinstance(total, int) and 0 < total <= done


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
    if run.is_evaluator:
        return [_epoch(EVALUATION_KEY, "evaluation", None, run.path, EVALUATOR_SCORES)]
    epochs = []
    for name in _listdir(run.path):
        match = _EPOCH_DIR.fullmatch(name)
        if match and not os.path.islink(os.path.join(run.path, name)):  # never followed (discovery says why)
            number = int(match.group(1))
            epoch = _epoch(name, f"epoch {number}", number, os.path.join(run.path, name), TRAINER_SCORES)
            if epoch.scores_path or epoch.has_debug:
                epochs.append(epoch)
    return sorted(epochs, key=lambda e: e.number)


def _epoch(key: str, label: str, number: Optional[int], folder: str, scores_name: str) -> Epoch:
    scores = os.path.join(folder, scores_name)
    has_debug = os.path.isdir(os.path.join(folder, DEBUGGER_DIR))  # a link is refused when opened, saying why
    return Epoch(key, label, number, folder, scores if os.path.lexists(scores) else None, has_debug,
                 None if has_debug else removal_reason(folder))


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def read_model_report(run_dir: str) -> Optional[dict[str, Any]]:
    """``model_report.json`` of the run in ``run_dir``, None when it has none; ``RunFileError`` (a ValueError)
    when it is not a model report: not a regular file, not JSON, or not shaped as ``debuggers.model_report``
    writes it (a drawing of it would fail on the first odd field)."""
    path = os.path.join(run_dir, MODEL_REPORT_FILE)
    if not os.path.lexists(path):
        return None
    report = read_run_json(path, "model report", MAX_MODEL_REPORT_BYTES)
    layers = report.get("layers", []) if isinstance(report, dict) else None
    if not isinstance(report, dict) or not isinstance(report.get("parameters", {}), dict) \
            or not isinstance(layers, list) or not all(isinstance(layer, dict) for layer in layers):
        raise RunFileError(f"{path} is not a Lantern model report (expected a JSON object with a 'parameters' "
                           "object and a 'layers' list of objects); remove it or rerun to rewrite it")
    return report
