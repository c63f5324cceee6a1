"""What the Runs tab reads of each run: its validation scores over epochs (each epoch's aggregated scores, as the
score chart reads them), its training loss and learning rate over steps (its training monitor file, read as the
Training tab reads it), its config as recorded in ``run_info.json`` (``runners.config_file.describe_config``'s
description) and its final scores (those of its last epoch with scores)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from run_dir import RunDir
from run_dir.errors import RunFileError
from runners.config_file import flat_config
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.runs import Run, last_modified
from runners.eval_viewer.shared.table import TABLE_ERRORS
from runners.eval_viewer.training.data import TRAINING_LOGS
from runners.eval_viewer.training.figures import thin_curve

DEFAULT_RUNS = 6  # runs shown before any is chosen: the open one and the most recently written
MAX_RUNS = 12
MAX_POINTS = 2_000  # of a run's training curve (each bucket of steps keeps its lowest and highest loss)
MAX_CONFIG_COLUMNS = 40
ABSENT = "(absent)"
VALUE_CHARACTERS = 60


@dataclass
class RunCurves:
    """One run's curves: validation scores by epoch, training loss and learning rate by step, and what it lacks."""

    run: Run
    epochs: list[int] = field(default_factory=list)
    scores: dict[str, list[Optional[float]]] = field(default_factory=dict)  # metric -> a value per epoch
    loss_steps: np.ndarray = field(default_factory=lambda: np.zeros(0))
    losses: np.ndarray = field(default_factory=lambda: np.zeros(0))
    lr_steps: np.ndarray = field(default_factory=lambda: np.zeros(0))
    lr: np.ndarray = field(default_factory=lambda: np.zeros(0))
    problems: list[str] = field(default_factory=list)

    @property
    def final(self) -> dict[str, Optional[float]]:
        """Each score at the run's last epoch that has it."""
        return {name: next((v for v in reversed(values) if v is not None), None)
                for name, values in self.scores.items()}


def default_runs(backend: ViewerBackend, open_run: Optional[str]) -> list[str]:
    """The open run and the runs written to most recently, ``DEFAULT_RUNS`` in all."""
    others = sorted((run for path, run in backend.discovery.runs.items() if path != open_run),
                    key=last_modified, reverse=True)
    return ([open_run] if backend.run(open_run) else []) + [run.path for run in others][:DEFAULT_RUNS - 1]


def run_curves(backend: ViewerBackend, run: Run) -> RunCurves:
    """What ``run`` recorded of its training; what cannot be read is said in ``problems``."""
    curves = RunCurves(run)
    for number, epoch in enumerate(backend.epochs(run)):
        try:
            aggregated = backend.aggregated(epoch)
        except TABLE_ERRORS:
            continue
        curves.epochs.append(epoch.number if epoch.number is not None else number)
        for name in aggregated:
            curves.scores.setdefault(name, [None] * (len(curves.epochs) - 1))
        for name, values in curves.scores.items():
            values.append(aggregated.get(name))
    try:
        log = TRAINING_LOGS.read(run)
    except FileNotFoundError:
        curves.problems.append(f"{run.name}: no training monitor file (a trainer with config['training_monitor'] "
                               "records its loss and learning rate at every step)")
        return curves
    except (OSError, RunFileError) as exc:
        curves.problems.append(f"{run.name}: {exc}")
        return curves
    curves.loss_steps, curves.losses = thin_curve(log.loss_steps, log.losses.astype(np.float64), MAX_POINTS)
    if log.lr.ndim == 2 and log.lr.shape[1]:
        chosen = np.unique(np.linspace(0, len(log.steps) - 1, min(len(log.steps), MAX_POINTS)).astype(np.int64))
        curves.lr_steps, curves.lr = log.steps[chosen], log.lr[chosen, 0]
    return curves


def run_config(run: Run) -> Any:
    """The config ``run_info.json`` records for ``run`` (None when it has none or cannot be read)."""
    try:
        info = RunDir(run.path).read_info()
    except (OSError, ValueError):
        return None
    return info.get("config") if isinstance(info, dict) else None


def config_rows(curves: list[RunCurves]) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    """A row per run (its name, path, epochs, final scores and the config values in which the runs differ), the
    score columns and the config columns (paths as ``config_differences`` writes them)."""
    flats = [flat_config(run_config(found.run)) for found in curves]
    paths = list(dict.fromkeys(path for flat in flats for path in flat))
    differing = [path for path in paths
                 if len({json.dumps(flat.get(path, ABSENT), sort_keys=True, default=str) for flat in flats}) > 1]
    scores = list(dict.fromkeys(name for found in curves for name in found.scores))
    rows = [{"run": found.run.name, "path": found.run.path, "epochs": len(found.epochs),
             **{f"final {name}": found.final.get(name) for name in scores},
             **{path: _shown(flat.get(path, ABSENT)) for path in differing[:MAX_CONFIG_COLUMNS]}}
            for found, flat in zip(curves, flats)]
    return [f"final {name}" for name in scores], differing[:MAX_CONFIG_COLUMNS], rows


def _shown(value: Any) -> Any:
    """A config value as a table cell: numbers as they are (they sort as numbers), the rest as short text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= VALUE_CHARACTERS else text[:VALUE_CHARACTERS - 1] + "…"
