"""Build a run's validation (or evaluation) dataset to show a datapoint's inputs, labels and meta info.

Datapoints are not stored with the run, so the viewer rebuilds the dataset from
the config file that started the run (``run_info.json: config_filepath``). That
file is the project's own code; a ``.py`` file inside a browsed log folder is
never imported, whatever ``run_info.json`` says, because anyone who can drop a
run into a log folder could otherwise run code in the viewer.
"""

from __future__ import annotations

import os
from typing import Any

from runners.eval_viewer.backend.runs import Run
from utils.builders import build_from_config
from utils.config_file import load_config


class DatasetUnavailable(Exception):
    """The run's dataset cannot be rebuilt; the message says why and what still works."""


def dataset_key(run: Run) -> str:
    return "eval_dataset" if run.is_evaluator else "val_dataset"


def build_run_dataset(run: Run, log_dirs: list[str]) -> Any:
    """The dataset the run's scores refer to, built from the run's config file."""
    path = _checked_config_path(run, log_dirs)
    key = dataset_key(run)
    try:
        config = load_config(path)
        if key not in config:
            raise DatasetUnavailable(f"config file {path} has no '{key}' entry, so the datapoints of "
                                     f"{run.name} cannot be rebuilt")
        return build_from_config(config[key], f"config['{key}']")
    except DatasetUnavailable:
        raise
    except Exception as exc:  # any error of the user's config module: shown in the page, the viewer goes on
        raise DatasetUnavailable(f"could not build '{key}' from {path}: {type(exc).__name__}: {exc}. "
                                 "Fix the config file (it must still import), then reopen the datapoint") from exc


def _checked_config_path(run: Run, log_dirs: list[str]) -> str:
    path = run.config_filepath
    if not path:
        raise DatasetUnavailable(f"{run.name}/run_info.json names no config file, so its datapoints cannot be "
                                 "rebuilt; scores and debug outputs are still shown")
    if not os.path.isfile(path):
        raise DatasetUnavailable(f"config file {path} of {run.name} no longer exists, so its datapoints cannot be "
                                 "rebuilt; restore the file (or rerun) to see inputs, labels and meta info")
    real = os.path.realpath(path)
    for root in [run.path, *log_dirs]:
        root = os.path.realpath(root)
        if os.path.commonpath([real, root]) == root:
            raise DatasetUnavailable(f"config file {path} lies inside the log folder {root}; the viewer imports "
                                     "only config files of the project, never files found among logs. Move the "
                                     "config into the project (e.g. configs/) and rerun")
    return path


def config_signature(run: Run) -> tuple[str, int]:
    """Changes when the config file is edited, so a cached dataset is rebuilt."""
    path = run.config_filepath or ""
    try:
        return path, os.stat(path).st_mtime_ns
    except OSError:
        return path, 0
