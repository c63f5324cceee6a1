"""What trainer and evaluator share: work dir, logging, seeds, device, model,
metric, debugger and the evaluation loop with its ``_eval_step``.

Subclasses define ``_init_components_`` (the order of the ``_init_*`` calls, as
in the design doc) and ``run``.
"""

from __future__ import annotations

import math
import os
import random
import shutil
from typing import Any, Optional

import numpy as np
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

from debuggers.wrappers.sequential_debugger import SequentialDebugger
from runners import distributed
from utils.atomic_files import atomic_write_json, read_json
from utils.builders import build_from_config
from utils.config_file import describe_config
from utils.errors import ConfigError, WorkDirError
from utils.ops import apply_tensor_op, idx_list
from utils.run_logging import get_run_logger

RUN_INFO_FILE = "run_info.json"


class BaseRunner:
    """Shared set-up and evaluation loop of Lantern's runners."""

    REQUIRED_KEYS: tuple[str, ...] = ("model", "metric")
    LOG_FILE = "run.log"

    def __init__(self, config: dict[str, Any]) -> None:
        missing = [k for k in self.REQUIRED_KEYS if k not in config]
        if missing:
            raise ConfigError(
                f"{type(self).__name__} config lacks {missing}; see configs/examples/ for a complete config"
            )
        if not config.get("work_dir"):
            raise ConfigError("config needs 'work_dir' (main.py sets logs/<config path> by default)")
        self.config = config
        self.work_dir = str(config["work_dir"])
        self.seed = int(config.get("seed", 0))
        self.debugger: Optional[SequentialDebugger] = None
        self.rank, self.world_size = 0, 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    # ----------------------------------------------------------- initialisation
    def _init_device_(self) -> None:
        wanted = str(self.config.get("device", "cpu"))
        if wanted.startswith("cuda") and not torch.cuda.is_available():
            self.device = torch.device("cpu")
            self._device_note = f"config asks for device {wanted!r} but CUDA is not available: running on the CPU"
        else:
            self.device = torch.device(wanted)
            self._device_note = ""
        self.rank, self.world_size = distributed.init_distributed(wanted)
        if self.device.type == "cuda" and self.world_size > 1:
            self.device = torch.device("cuda", distributed.local_rank())
            torch.cuda.set_device(self.device)

    def _init_work_dir_(self) -> None:
        """Refuse a work dir that holds a different run; record this run's identity."""
        identity = {"runner": type(self).__name__, "config": describe_config(
            {k: v for k, v in self.config.items() if k != "work_dir"})}
        info_path = os.path.join(self.work_dir, RUN_INFO_FILE)
        if os.path.exists(info_path):
            if read_json(info_path) != identity:
                raise WorkDirError(
                    f"work dir {self.work_dir!r} holds another run (its {RUN_INFO_FILE} describes a different "
                    "config). Set another 'work_dir' in the config, or delete the folder to start over"
                )
        elif os.path.isdir(self.work_dir) and os.listdir(self.work_dir):
            raise WorkDirError(
                f"work dir {self.work_dir!r} is not empty and holds no {RUN_INFO_FILE}: it is not a Lantern run. "
                "Set another 'work_dir' in the config, or empty the folder"
            )
        distributed.barrier()
        if self.is_main:
            os.makedirs(self.work_dir, exist_ok=True)
            atomic_write_json(info_path, identity)
        distributed.barrier()

    def _init_logger(self) -> None:
        self.logger = get_run_logger(self.work_dir, self.LOG_FILE, self.rank)
        if self._device_note:
            self.logger.warning(self._device_note)
        self.logger.info(f"{type(self).__name__} on {self.device} (rank {self.rank}/{self.world_size}), "
                         f"work dir {os.path.abspath(self.work_dir)}")

    def _init_determinism_(self) -> None:
        seed_everything(self.seed)
        torch.use_deterministic_algorithms(True, warn_only=True)

    def _init_model_(self) -> None:
        seed_everything(self.seed)
        self.model = build_from_config(self.config["model"], "config['model']").to(self.device)
        if not isinstance(self.model, torch.nn.Module):
            raise ConfigError(f"config['model'] must build a torch.nn.Module, got {type(self.model).__name__}")

    def _init_metric_(self) -> None:
        self.metric = build_from_config(self.config["metric"], "config['metric']")

    def _init_debugger(self) -> None:
        """Build the debugger once the model exists; unknown layer names stop the run here."""
        if not self.config.get("debugger"):
            self.debugger = None
            return
        self.debugger = build_from_config(self.config["debugger"], "config['debugger']")
        if not isinstance(self.debugger, SequentialDebugger):
            raise ConfigError(
                f"config['debugger'] must build a SequentialDebugger, got {type(self.debugger).__name__}; "
                "wrap your debuggers in {'class': SequentialDebugger, 'args': {'debuggers_config': [...]}}"
            )
        self.debugger.register_hooks(self.model, logger=self.logger)
        self.logger.info(f"Debugger ready: {list(self.debugger.debuggers)}")

    def _build_dataloader(self, dataset_key: str, dataloader_key: str, sampler: Any) -> DataLoader:
        dataset = build_from_config(self.config[dataset_key], f"config['{dataset_key}']")
        entry = self.config.get(dataloader_key) or {"class": DataLoader, "args": {}}
        args = entry.get("args", {}) if isinstance(entry, dict) else {}
        for key in ("shuffle", "sampler", "dataset"):
            if key in args:
                raise ConfigError(
                    f"config['{dataloader_key}']['args'] sets '{key}', which the runner decides (training is "
                    "shuffled with the run's seed, evaluation reads in order); remove it"
                )
        return build_from_config(entry, f"config['{dataloader_key}']", dataset=dataset,
                                 sampler=sampler(dataset))

    def _eval_sampler(self, dataset: Any) -> distributed.ShardSampler:
        return distributed.ShardSampler(len(dataset), self.rank, self.world_size)

    # ------------------------------------------------------------ evaluation
    @property
    def eval_model(self) -> torch.nn.Module:
        """The model without a DDP wrapper: evaluation must not run collectives per batch."""
        return getattr(self.model, "module", self.model)

    def _eval_step(self, dp: dict[str, Any]) -> None:
        dp = apply_tensor_op(lambda t: t.to(self.device, non_blocking=True), dp)
        dp["outputs"] = self.eval_model(dp["inputs"])
        scores = self.metric(dp["outputs"], dp["labels"])
        self.metric.add_to_buffer(idx_list(dp["meta_info"]["idx"]), scores)
        if self.debugger is not None and self.debugger.enabled:
            dp["debug"] = self.debugger(dp, self.eval_model)

    def _eval_loop(self, dataloader: DataLoader, desc: str) -> dict:
        """Run every batch through ``_eval_step``; return the scores of all ranks."""
        self.eval_model.eval()
        self.metric.reset_buffer()
        with torch.no_grad():
            for dp in tqdm(dataloader, desc=desc, leave=False, disable=not self.is_main):
                self._eval_step(dp)
        merged: dict[int, dict] = {}
        for buffer in distributed.gather_objects(self.metric.buffer):
            merged.update(buffer)
        return self.metric.summarize(merged)

    def _start_debug_capture(self, debugger_dir: str) -> None:
        """Enable the debugger for one pass, writing pages into an emptied ``debugger_dir``."""
        if self.is_main and os.path.isdir(debugger_dir):
            shutil.rmtree(debugger_dir)
        distributed.barrier()
        self.debugger.reset_buffer(debugger_dir)
        self.debugger.enabled = True

    def _finish_debug_capture(self, debugger_dir: str) -> None:
        summary = self.debugger.save_all(debugger_dir)
        self.debugger.enabled = False
        self.logger.info(f"Debug outputs: {summary['datapoints']} datapoints in {summary['pages']} page(s), "
                         f"{summary['bytes'] / 2**20:.1f} MB in {debugger_dir}")

    def _close(self) -> None:
        if self.debugger is not None:
            self.debugger.close()


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def write_scores(path: str, scores: dict) -> None:
    """Scores files are strict JSON: NaN is written as null so any reader accepts them."""
    atomic_write_json(path, _nan_to_none(scores))


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    return value
