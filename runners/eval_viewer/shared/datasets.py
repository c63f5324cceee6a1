"""A datapoint's inputs, labels and meta info, for the viewer and the export.

A run folder is data: showing it never runs code it names. So a datapoint's
inputs come from what the run captured while evaluating it
(``runners/datapoint_capture.py``: ``<run>/datapoints/``, safe pages like the
debug outputs). Rebuilding the dataset from the config file that ``run_info.json``
names imports and runs that file, so it happens only when the user opted in
(``--trust-configs``) and even then never for a file inside a log folder.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from run_dir.names import DATAPOINTS_DIR, RUN_INFO_FILE
from run_dir.run_files import lies_inside
from runners.config_file import load_config
from runners.eval_viewer.shared.debug import EpochDebug
from runners.eval_viewer.shared.runs import Run

OPT_IN = ("To rebuild them from the config file the run names, restart with --trust-configs: that imports and "
          "runs the file, so only do it for runs you trust")


class DatasetUnavailable(Exception):
    """The run's dataset cannot be rebuilt; the message says why and what still works."""


def dataset_key(run: Run) -> str:
    return "eval_dataset" if run.is_evaluator else "val_dataset"


def build_run_dataset(run: Run, log_dirs: list[str]) -> Any:
    """The dataset the run's scores refer to, built from the run's config file."""
    from utils.builders import build_from_config  # torch: imported only where a dataset is rebuilt (trusted configs)

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
        raise DatasetUnavailable(f"{run.name}/{RUN_INFO_FILE} names no config file, so its datapoints cannot be "
                                 "rebuilt; scores and debug outputs are still shown")
    if not os.path.isfile(path):
        raise DatasetUnavailable(f"config file {path} of {run.name} no longer exists, so its datapoints cannot be "
                                 "rebuilt; restore the file (or rerun) to see inputs, labels and meta info")
    for root in [run.path, *log_dirs]:
        if lies_inside(path, root):
            raise DatasetUnavailable(f"config file {path} lies inside the log folder {root} (as named or through a "
                                     "link); the viewer imports only config files of the project, never files found "
                                     "among logs. Move the config into the project (e.g. configs/) and rerun")
    return path


def config_signature(run: Run) -> tuple[str, int]:
    """Changes when the config file is edited, so a cached dataset is rebuilt."""
    path = run.config_filepath or ""
    try:
        return path, os.stat(path).st_mtime_ns
    except OSError:
        return path, 0


def captured_folder(run: Run) -> str:
    return os.path.join(run.path, DATAPOINTS_DIR)


def not_captured(run: Run, idx: int, captured: Optional[EpochDebug]) -> str:
    """Why ``idx`` has no inputs to show without the opt-in, and how to see them."""
    if captured is None:
        return (f"{run.name} holds no captured inputs (a run from before Lantern captured them, or one with "
                f"config['datapoint_capture'] = False); its scores and debug outputs are shown. {OPT_IN}")
    return (f"the inputs of datapoint {idx} were not captured by {run.name} (its capture stopped early: "
            "config['datapoint_capture']['max_total_mb'] was reached or the run stopped; see its log); "
            f"scores and debug outputs are shown. {OPT_IN}")
