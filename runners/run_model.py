"""An epoch's model, metric and dataset, rebuilt from the run's own config file and checkpoint.

A run folder is data: reading it never runs code. Rebuilding the model imports the config file that the run's
``run_info.json`` names, which runs that file and the model's code. So it happens only when the user passes
the trust flag (``--trust-configs``, the viewer's), never for a config file inside a run folder (this run's or
another's: any folder holding a run_info.json), and only when the file still describes the run: its model,
metric, dataset and dataloader entries must be those ``run_info.json`` recorded (an edited config would rebuild
another model than the one whose failures were found). The checkpoint is the analysed epoch's own
(``epoch_N/checkpoint.pt``; an evaluator's ``config['checkpoint']``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch
from torch.utils.data import DataLoader, Subset

from run_dir import RunDir
from run_dir.errors import RunFileError
from run_dir.names import CHECKPOINT_FILE, RUN_INFO_FILE, epoch_dir_name
from run_dir.run_files import lies_inside
from runners.base_runner import seed_everything
from runners.checkpoints import load_checkpoint_file, load_model_state
from runners.config_file import config_differences, describe_config, load_config
from runners.evaluators.base_evaluator import resolve_checkpoint
from runners.plain_model import ModelCallSettings, as_lantern_model
from utils.builders import build_from_config
from utils.errors import CheckpointError, ConfigError, LanternUserError
from utils.ops import apply_tensor_op, idx_list

TRUST_FLAG = "--trust-configs"


class Cancelled(Exception):
    """The caller asked the rerun to stop (``cancel`` was set); nothing was left half done."""


@dataclass
class EpochModel:
    """The model of one epoch in eval mode, with the run's metric, dataset and dataloader entry."""

    model: torch.nn.Module
    metric: Any
    dataset: Any
    loader_entry: dict
    device: torch.device
    config: dict
    config_path: str
    checkpoint: str

    @classmethod
    def rebuild(cls, epoch_dir: str, trust_configs: bool) -> EpochModel:
        """The model of ``epoch_dir`` (a trainer's ``epoch_N`` folder or an evaluator's work dir)."""
        evaluator = os.path.isfile(RunDir(epoch_dir).info)
        run_dir = epoch_dir if evaluator else os.path.dirname(os.path.abspath(epoch_dir))
        info = _run_info(run_dir)
        path = _trusted_config_path(run_dir, info, trust_configs)
        config = _load(path)
        dataset_key, loader_key = ("eval_dataset", "eval_dataloader") if evaluator \
            else ("val_dataset", "val_dataloader")
        _check_unchanged(path, info, config, ("model", "model_inputs", "model_outputs", "metric", dataset_key,
                                              loader_key))
        checkpoint = resolve_checkpoint(str(config["checkpoint"])) if evaluator and config.get("checkpoint") \
            else _epoch_checkpoint(epoch_dir, run_dir)
        device = torch.device(str(config.get("device", "cpu")))
        if device.type == "cuda" and not torch.cuda.is_available():
            device = torch.device("cpu")
        seed_everything(int(config.get("seed", 0)))
        model = as_lantern_model(build_from_config(config["model"], "config['model']"),
                                 ModelCallSettings.from_config(config))
        load_model_state(model, load_checkpoint_file(checkpoint)["model_state_dict"], checkpoint)
        return cls(model.to(device).eval(), build_from_config(config["metric"], "config['metric']"),
                   build_from_config(config[dataset_key], f"config['{dataset_key}']"),
                   config.get(loader_key) or {"class": DataLoader, "args": {}}, device, config, path, checkpoint)

    def batches(self, idx: np.ndarray, cancel: Optional[threading.Event] = None) -> Iterator[dict[str, Any]]:
        """The datapoints ``idx`` (dataset indices), collated by the run's dataloader entry, on the model's device."""
        loader = build_from_config(self.loader_entry, "config's dataloader", dataset=Subset(self.dataset, idx.tolist()))
        for batch in loader:
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            got = idx_list(batch["meta_info"]["idx"])
            if not np.isin(got, idx).all():
                raise ConfigError(f"the dataset rebuilt from {self.config_path} gives the datapoints asked for by "
                                  f"their dataset index the idx {got[:5]}, not among {idx[:5].tolist()}...: "
                                  "meta_info['idx'] must be the dataset index, as the epoch table's idx are")
            yield apply_tensor_op(lambda t: t.to(self.device), batch)


def _run_info(run_dir: str) -> dict[str, Any]:
    run = RunDir(run_dir)
    try:
        info = run.read_info()
    except FileNotFoundError:
        raise ConfigError(f"{run_dir} holds no {RUN_INFO_FILE}: it is not a Lantern run, so the config and "
                          "checkpoint of its model are unknown") from None
    except RunFileError as exc:
        raise ConfigError(str(exc)) from None
    if not isinstance(info, dict):
        raise ConfigError(f"{run.info} is not a JSON object: it is not a Lantern {RUN_INFO_FILE}")
    return info


def _trusted_config_path(run_dir: str, info: dict[str, Any], trust_configs: bool) -> str:
    path = info.get("config_filepath")
    if not isinstance(path, str) or not path:
        raise ConfigError(f"{run_dir}/{RUN_INFO_FILE} names no config file (a run started from Python, not with "
                          "main.py): the model cannot be rebuilt to intervene on it")
    if not trust_configs:
        raise ConfigError(f"verifying rebuilds the model of {run_dir} from the config file it names, {path}, "
                          f"which imports and runs that file: pass {TRUST_FLAG} as well if you trust this run")
    if not os.path.isfile(path):
        raise ConfigError(f"config file {path} of {run_dir} no longer exists: restore it to rebuild the run's model")
    folder = run_dir if lies_inside(path, run_dir) else \
        _enclosing_run(os.path.abspath(path)) or _enclosing_run(os.path.realpath(path))
    if folder is not None:
        raise ConfigError(f"config file {path} lies inside the run folder {folder} (as named or through a link): a "
                          "run folder is data, and Lantern imports no file found in one. Move the config into the "
                          "project (e.g. configs/)")
    return path


def _enclosing_run(path: str) -> Optional[str]:
    """The nearest folder above ``path`` that is a Lantern run (it holds a run_info.json), if any: another run's
    folder is data as much as this one's."""
    folder = os.path.dirname(path)
    while True:
        if os.path.isfile(os.path.join(folder, RUN_INFO_FILE)):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _load(path: str) -> dict[str, Any]:
    try:
        return load_config(path)
    except LanternUserError:
        raise
    except Exception as exc:  # the user's config module: say which file, not a traceback from inside it
        raise ConfigError(f"config file {path} failed to import ({type(exc).__name__}: {exc}); fix it (it must "
                          "still import) and verify again") from exc


def _check_unchanged(path: str, info: dict[str, Any], config: dict[str, Any], keys: tuple[str, ...]) -> None:
    """The entries that rebuild the model and its data must be those the run recorded."""
    recorded = info.get("config")
    if not isinstance(recorded, dict):
        raise ConfigError(f"the run's {RUN_INFO_FILE} records no config, so {path} cannot be checked to still describe "
                          "the run; rerun it with this version of Lantern to verify its findings")
    changes = [change for key in keys for change in config_differences(
        recorded.get(key), describe_config(config.get(key)), key)]
    if changes:
        raise ConfigError(f"config file {path} changed since the run: {'; '.join(changes[:3])}. The model and data "
                          "rebuilt from it would not be the run's; restore the file as it was when the run started")


def _epoch_checkpoint(epoch_dir: str, run_dir: str) -> str:
    path = os.path.join(epoch_dir, CHECKPOINT_FILE)
    if os.path.isfile(path):
        return path
    kept = [epoch_dir_name(epoch) for epoch in RunDir(run_dir).epochs_holding(CHECKPOINT_FILE)]
    raise CheckpointError(f"{os.path.basename(epoch_dir)} of {run_dir} has no {CHECKPOINT_FILE} (the run keeps only "
                          f"some epochs' checkpoints: config['checkpoint_method']); verify an epoch that has one with "
                          f"--epoch N ({', '.join(kept) or 'none has'})")
