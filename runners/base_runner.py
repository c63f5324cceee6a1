"""What trainer and evaluator share: work dir, logging, seeds, device, model,
metric, debugger, hooks and the evaluation loop with its ``_eval_step``.

Subclasses define ``_init_components_`` (the order of the ``_init_*`` calls: the
work dir before the logger, the model before the debugger) and ``run``. What
observes a run (debug outputs, datapoint capture, epoch table,
findings, ...) is a hook, called in order (``runners/hooks/__init__.py``).
"""

from __future__ import annotations

import logging
import math
import os
import random
import re
import shutil
import socket
import time
import uuid
from collections.abc import Sized
from typing import Any, Optional

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from debuggers.wrappers.sequential_debugger import SequentialDebugger
from run_dir.names import EPOCH_GLOB, LOCK_FILE, RUN_INFO_FILE, RUNNER_LOG
from run_dir.run_log import append_to_log, get_run_logger
from runners.config_file import config_differences, describe_config
from runners.config_keys import UNIDENTIFYING_KEYS, RunnerSettings, check_config_keys
from runners.datapoint_capture import CaptureLimits
from runners.datapoint_errors import CollateErrors, DatapointErrors
from runners.failure_definition import FailureDefinitionSettings
from runners.hooks import (
    DatapointCaptureHook,
    DebuggerHook,
    EpochTableHook,
    EvalPass,
    FindingsHook,
    FindingsSettings,
    Hooks,
    RunnerHook,
)
from runners.metric_contract import check_buffer, check_scores, checked_summary
from runners.plain_model import ModelCallSettings, PlainModel, as_lantern_model
from runners.progress import Progress
from runners.run_writes import write_run_file
from runners.unique_idx import SeenIdx, merge_rank_buffers
from runners.work_dir_guard import WorkDirWatch, lock_work_dir, recorded_launch, release_work_dir
from utils import distributed
from utils.atomic_files import TEMP_MARKER, atomic_write_json, read_json
from utils.builders import build_from_config
from utils.errors import (
    ConfigError,
    DatasetContractError,
    ModelContractError,
    WorkDirError,
)
from utils.folder_glob import glob_in
from utils.ops import apply_tensor_op, describe_value, idx_list

_STALE_TEMP = re.compile(rf"\..+{re.escape(TEMP_MARKER)}[\d-]+")  # utils.atomic_files.temporary_path
UNIDENTIFYING_DEBUGGER_ARGS = ("keep", "summaries_every_epoch")  # SequentialDebugger's capture policies


class BaseRunner:
    """Shared set-up and evaluation loop of Lantern's runners."""

    REQUIRED_KEYS: tuple[str, ...] = ("model", "metric")
    # top-level config keys this runner reads besides runners.config_keys.COMMON_KEYS: any other is refused
    CONFIG_KEYS: tuple[str, ...] = ()
    LOG_FILE = RUNNER_LOG
    EVAL_DATASET_KEY: str  # the dataset evaluated: the model report is measured on its first datapoint
    # a file written once the run has finished some work (an epoch, an evaluation); until then the work dir
    # belongs to whoever runs next
    FINISHED_WORK_FILE: str

    def __init__(self, config: dict[str, Any]) -> None:
        # found before the log file exists: another runner's keys, ignored
        self._start_warnings: list[str] = check_config_keys(config, type(self).__name__, self.CONFIG_KEYS)
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
        self.settings = RunnerSettings.from_config(config)
        self.hooks = Hooks(self._hooks_of(config))  # the built-in ones, their settings checked before anything runs
        self.debugger: Optional[SequentialDebugger] = None
        self._work_dir_watch: Optional[WorkDirWatch] = None  # rank 0, once the work dir exists
        # dataset[0] of the evaluated dataset as collated at start-up, until the hooks' before_run (the model
        # report) has used it: a user's __getitem__ may be slow (a big image, network storage)
        self.first_eval_batch: Any = None
        self.rank, self.world_size = 0, 1
        self.launch: Optional[str] = None  # this launch's id, once recorded in run_info.json (see log_stop)
        self._seen_idx = SeenIdx(0)  # meta_info['idx'] of this evaluation pass (runners/unique_idx.py)
        self._metric_checked = False  # on the first batch this process scores, see _check_metric
        self.stage = "start-up"  # then "epoch N training", ...: said when the run stops (main.py)

    def _hooks_of(self, config: dict[str, Any]) -> list[RunnerHook]:
        """The built-in hooks, in their order (``runners/hooks/__init__.py``), with their settings from ``config``."""
        return [EpochTableHook(FailureDefinitionSettings.from_config(config)),
                DatapointCaptureHook(CaptureLimits.from_config(config)), DebuggerHook(),
                FindingsHook(FindingsSettings.from_config(config))]

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def log_stop(cls, config: dict[str, Any], message: str, launch: Optional[str], stage: str = "start-up",
                 exit_code: int = 2, traceback_text: str = "") -> Optional[str]:
        """Append why this process stops to the log of the run in ``config['work_dir']``: a run started under
        nohup or slurm is read from its log, which would otherwise just end. ``launch``: the launch id this
        process recorded in the run's ``run_info.json``, None if it never got so far. Returns the log's path
        if it got the stop.

        Only a run whose ``run_info.json`` still records this launch gets "stopped during <stage>" (at ERROR), as
        its last line, after ``traceback_text``. A launch refused before it recorded one says so at WARNING in
        the log of the run it found, which it left as it was (that run may be going on). A work dir whose
        ``run_info.json`` records another launch (deleted and reused while this one ran), or none at all
        (another tool's folder), gets nothing: its log is not this run's."""
        work_dir = str(config.get("work_dir") or "")
        info_path = os.path.join(work_dir, RUN_INFO_FILE)
        if not work_dir or not os.path.isfile(info_path):
            return None
        rank, pid = int(os.environ.get("RANK", "0")), os.getpid()
        if launch is None:
            append_to_log(work_dir, cls.LOG_FILE, rank, logging.WARNING, f"another launch (process {pid}) into "
                          f"this work dir was refused and changed nothing here (exit code {exit_code}): {message}")
            return None
        if recorded_launch(info_path) != launch:
            return None
        if traceback_text:
            append_to_log(work_dir, cls.LOG_FILE, rank, logging.ERROR, f"what stopped process {pid}:\n"
                          f"{traceback_text.rstrip()}")
        return append_to_log(work_dir, cls.LOG_FILE, rank, logging.ERROR,
                             f"process {pid} stopped during {stage} (exit code {exit_code}): {message}")

    def resume_advice(self) -> str:
        """What running the same command again does, for a stop message."""
        return "once fixed, run the same command again"

    # ----------------------------------------------------------- initialisation
    def _init_device_(self) -> None:
        wanted = str(self.config.get("device", "cpu"))
        if wanted.startswith("cuda") and not torch.cuda.is_available():
            self.device = torch.device("cpu")
            self._start_warnings.append(
                f"config asks for device {wanted!r} but CUDA is not available: running on the CPU")
        else:
            self.device = torch.device(wanted)
        if self.device.type == "cuda" and distributed.env_world_size() > 1:
            self.device = torch.device("cuda", distributed.local_rank())
            torch.cuda.set_device(self.device)
        self.rank, self.world_size = distributed.init_distributed(self.device,
                                                                  float(self.settings.distributed_timeout_s))

    def _init_work_dir_(self) -> None:
        """Refuse a work dir that holds a different run; record this run's identity.

        A different run that finished nothing (it stopped at start-up, or in its first epoch) gives its work
        dir to this one: its files are removed, so rerunning after fixing a typo just works.
        """
        identity = {"runner": type(self).__name__, "config": describe_config(
            {k: v for k, v in self.config.items() if k not in UNIDENTIFYING_KEYS})}
        info_path = os.path.join(self.work_dir, RUN_INFO_FILE)
        take_over = False
        if os.path.exists(info_path):
            previous, current = _identifying(_read_run_info(info_path), identity), _identifying(identity, identity)
            if previous != current:
                if os.path.exists(os.path.join(self.work_dir, self.FINISHED_WORK_FILE)):
                    raise WorkDirError(_another_run(self.work_dir, previous, current))
                take_over = True
                self._start_warnings.append(
                    f"work dir {self.work_dir!r} held a run of another config that finished nothing; its files "
                    "were removed and this run uses the folder")
        elif os.path.isdir(self.work_dir) and set(os.listdir(self.work_dir)) - {LOCK_FILE}:
            raise WorkDirError(
                f"work dir {self.work_dir!r} is not empty and holds no {RUN_INFO_FILE}: it is not a Lantern run. "
                "Set another 'work_dir' in the config, or empty the folder"
            )
        distributed.barrier("checking the work dir")
        launch = distributed.broadcast_object(uuid.uuid4().hex)
        if self.is_main:
            info = {**identity, "config_filepath": self.config.get("config_filepath"), "launch": launch}
            write_run_file(info_path, lambda: _create_work_dir(self.work_dir, info_path, info, take_over))
            self._work_dir_watch = WorkDirWatch(self.work_dir, info_path, launch)
        distributed.barrier("waiting for rank 0 to create the work dir")
        if not self.is_main:
            _check_shared_work_dir(info_path, launch, self.rank)
        self.launch = launch  # recorded: from here on the work dir is this launch's run

    def _init_logger(self) -> None:
        self.logger = get_run_logger(self.work_dir, self.LOG_FILE, self.rank)
        for warning in self._start_warnings:
            self.logger.warning(warning)
        self.logger.info(f"{type(self).__name__} on {self.device} (rank {self.rank}/{self.world_size}), "
                         f"work dir {os.path.abspath(self.work_dir)}")

    def _init_determinism_(self) -> None:
        seed_everything(self.seed)
        torch.use_deterministic_algorithms(True, warn_only=True)

    def _init_model_(self) -> None:
        seed_everything(self.seed)
        model = build_from_config(self.config["model"], "config['model']")
        if not isinstance(model, torch.nn.Module):
            raise ConfigError(f"config['model'] must build a torch.nn.Module, got {type(model).__name__}")
        first = self.first_eval_batch["inputs"] if isinstance(self.first_eval_batch, dict) else None
        self.model = as_lantern_model(model, ModelCallSettings.from_config(self.config), first).to(self.device)
        if isinstance(self.model, PlainModel):
            self.logger.info(f"config['model'] ({type(model).__name__}) takes tensors: {self.model.describe()}")

    def _init_metric_(self) -> None:
        self.metric = build_from_config(self.config["metric"], "config['metric']")

    def _init_debugger(self) -> None:
        """Build the debugger once the model exists (its hook registers it on the model at ``before_run``)."""
        if not self.config.get("debugger"):
            return
        self.debugger = build_from_config(self.config["debugger"], "config['debugger']")
        if not isinstance(self.debugger, SequentialDebugger):
            raise ConfigError(
                f"config['debugger'] must build a SequentialDebugger, got {type(self.debugger).__name__}; "
                "wrap your debuggers in {'class': SequentialDebugger, 'args': {'debuggers_config': [...]}}"
            )

    def _before_run(self) -> None:
        """Add the config's own hooks after the built-in ones, then start them all; dataset[0] of the evaluated
        dataset (the model report's input) is needed no more."""
        try:
            self.hooks = Hooks([*self.hooks.hooks, *self._own_hooks()])
            self.hooks.call("before_run", self)
        finally:
            self.first_eval_batch = None

    def _own_hooks(self) -> list[RunnerHook]:
        """``config['hooks']``, each built from its entry (once the components are, as every entry)."""
        hooks = []
        for i, entry in enumerate(self.settings.hooks):
            where = f"config['hooks'][{i}]"
            hook = build_from_config(entry, where)
            if not isinstance(hook, RunnerHook):
                raise ConfigError(f"{where} must build a RunnerHook (from runners.hooks import RunnerHook), got "
                                  f"{type(hook).__name__}; subclass it and override the calls you need")
            hooks.append(hook)
        return hooks

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
        where = f"config['{dataset_key}'] ({type(dataset).__name__})"
        if not isinstance(dataset, IterableDataset):  # an error names the datapoint's index
            dataset = DatapointErrors(dataset, where)
        loader = build_from_config(entry, f"config['{dataloader_key}']", dataset=dataset, sampler=sampler(dataset))
        loader.collate_fn = CollateErrors(loader.collate_fn, f"config['{dataloader_key}']")
        first_batch = _check_first_datapoint(loader, where)
        if dataset_key == self.EVAL_DATASET_KEY:
            self.first_eval_batch = first_batch
        return loader

    def _eval_sampler(self, dataset: Any) -> distributed.ShardSampler:
        return distributed.ShardSampler(len(dataset), self.rank, self.world_size)

    # ------------------------------------------------------------ evaluation
    @property
    def eval_model(self) -> torch.nn.Module:
        """The model without a DDP wrapper: evaluation must not run collectives per batch."""
        return getattr(self.model, "module", self.model)

    def _eval_step(self, dp: dict[str, Any]) -> None:
        idx = idx_list(dp["meta_info"]["idx"])
        first_batch = not self._seen_idx  # of this evaluation pass (a batch is never empty)
        self._seen_idx.add_new(idx)  # before anything is keyed by it
        self.hooks.call("before_eval_batch", self, dp)
        dp = apply_tensor_op(lambda t: t.to(self.device, non_blocking=True), dp)
        with self.hooks.eval_forward(self, dp):
            dp["outputs"] = self._forward(self.eval_model, dp["inputs"])
        dp["scores"] = self.metric(dp["outputs"], dp["labels"])
        if first_batch:
            check_scores(dp["scores"], self.metric)
        self.metric.add_to_buffer(idx, dp["scores"])
        self.hooks.call("after_eval_batch", self, dp)

    def _check_metric(self, outputs: dict, labels: Any) -> None:
        """Score the first batch this process meets (a trainer's first training batch, before its first step) and
        check the scores' contract: a metric returning strings stops the run here, naming the score, not after a
        whole epoch inside Lantern's code."""
        with torch.no_grad():
            check_scores(self.metric(apply_tensor_op(torch.Tensor.detach, outputs), labels), self.metric)
        self._metric_checked = True

    def _forward(self, model: torch.nn.Module, inputs: Any) -> dict:
        """``model(inputs)``, checked against the contract the criterion, metric and debuggers rely on."""
        outputs = model(inputs)
        if not isinstance(outputs, dict):
            raise ModelContractError(
                f"{type(self.eval_model).__name__}.forward takes the inputs dict and returned "
                f"{describe_value(outputs)}, but a model that takes the dict returns a dict of named outputs: "
                "forward(inputs: dict) -> dict. The criterion and the metric read it by key (CrossEntropyCriterion "
                "and ClassificationMetric read outputs['logits'], set by their output_key argument). Return e.g. "
                "{'logits': logits}, or take a tensor (forward(self, x)) and Lantern names a tensor output 'logits'; "
                "see docs/your_project.md, 'Your model as it is'")
        return outputs

    def _eval_loop(self, dataloader: DataLoader, desc: str, eval_pass: EvalPass) -> dict:
        """Run every batch through ``_eval_step`` between the hooks' start and end of the pass; return the scores
        of all ranks."""
        self.eval_model.eval()
        self.metric.reset_buffer()
        check_buffer(self.metric)
        self._seen_idx = SeenIdx(len(dataloader.dataset) if isinstance(dataloader.dataset, Sized) else 0)
        self.hooks.call("before_eval_epoch", self, eval_pass)
        with torch.no_grad():
            for dp in Progress(dataloader, desc, self.logger, self.is_main):
                self._eval_step(dp)
        every_rank = merge_rank_buffers(distributed.gather_objects(self.metric.buffer))
        scores = checked_summary(self.metric.summarize(every_rank), self.metric)
        self.hooks.call("after_eval_epoch", self, eval_pass, scores)
        return scores

    def _check_work_dir(self, about_to: str) -> None:
        """Stop (rank 0) if the work dir was deleted or replaced since the run started."""
        if self._work_dir_watch is not None:
            self._work_dir_watch.check(about_to)

    def _close(self) -> None:
        """The hooks' ``close``; the work dir's lock is released whatever they raise."""
        try:
            self.hooks.close(self)
        finally:
            release_work_dir(self.work_dir)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def write_scores(path: str, scores: dict) -> None:
    """Scores files are strict JSON: NaN is written as null so any reader accepts them."""
    write_run_file(path, lambda: atomic_write_json(path, _nan_to_none(scores)))


def _create_work_dir(work_dir: str, info_path: str, info: dict, take_over: bool) -> None:
    os.makedirs(work_dir, exist_ok=True)
    lock_work_dir(work_dir)  # before anything is deleted or written: another copy may be running
    if take_over:
        remove_run_files(work_dir)
    remove_stale_temporaries(work_dir)
    atomic_write_json(info_path, info)


def remove_run_files(work_dir: str) -> None:
    """Empty a run's folder of what runs write (hidden files, such as a lock, stay)."""
    for name in os.listdir(work_dir):
        path = os.path.join(work_dir, name)
        if name.startswith("."):
            continue
        shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)


def remove_stale_temporaries(work_dir: str) -> None:
    """Delete the hidden temporaries of atomic writes that a killed process left in the run's folders."""
    folders = [work_dir] + glob_in(work_dir, EPOCH_GLOB)
    for folder in folders:
        for name in os.listdir(folder) if os.path.isdir(folder) else []:
            if _STALE_TEMP.fullmatch(name):
                os.remove(os.path.join(folder, name))


def _check_shared_work_dir(info_path: str, launch: str, rank: int, wait_s: float = 30.0) -> None:
    """Every rank must see rank 0's files: on several machines the work dir must be on a shared filesystem."""
    deadline = time.monotonic() + wait_s  # network filesystems may show a new file a little late
    while True:
        if recorded_launch(info_path) == launch:
            return
        if time.monotonic() > deadline:
            raise WorkDirError(
                f"rank {rank} on {socket.gethostname()} does not see the {info_path} that rank 0 just wrote: "
                "every rank must see the same work dir. On several machines, put 'work_dir' on a filesystem "
                "shared by all of them (NFS, Lustre, ...) under the same path"
            )
        time.sleep(0.2)


def _check_first_datapoint(loader: DataLoader, dataset_name: str) -> Any:
    """Collate ``dataset[0]`` here, in the main process, before any epoch: a dataset that breaks the datapoint
    contract is refused at once, in one line naming the dataset, not later from inside a DataLoader worker.
    Returns that batch of one, or None where there is no datapoint 0 to check."""
    dataset = loader.dataset
    if loader.batch_sampler is None or isinstance(dataset, IterableDataset) or len(dataset) == 0:
        return None  # no batches of datapoints to check, or no datapoint 0
    where = f"{dataset_name}, dataset[0]"
    try:  # the project's __getitem__ or collate_fn raising: one line naming the datapoint (DatasetItemError)
        return loader.collate_fn([dataset[0]])
    except DatasetContractError as exc:
        raise DatasetContractError(f"{where}: {exc}") from None


def _another_run(work_dir: str, previous: dict, identity: dict, shown: int = 3) -> str:
    """Why ``work_dir`` is refused: which config entries differ from its run's, and the two ways out."""
    changes = config_differences(previous.get("config"), identity["config"])
    more = f" and {len(changes) - shown} more" if len(changes) > shown else ""
    return (f"work dir {work_dir!r} holds another run, whose {RUN_INFO_FILE} describes a different config: "
            f"{'; '.join(changes[:shown]) or 'runner ' + str(previous.get('runner'))}{more}. A run that has "
            "finished work keeps its config, even to train for more epochs (the scheduler and the checkpoint epochs "
            "depend on 'epochs'). Set another 'work_dir' in the config for the new run, or delete the folder to "
            "start over")


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    return value


def _identifying(info: dict, identity: dict) -> dict:
    """The parts of a run's ``run_info.json`` (or of ``identity``) that tell runs apart: ``identity``'s keys,
    without the debugger's capture policies (a run_info.json written before they were left out has them)."""
    kept = {k: v for k, v in info.items() if k in identity}
    debugger = kept["config"].get("debugger") if isinstance(kept.get("config"), dict) else None
    if isinstance(debugger, dict) and isinstance(debugger.get("args"), dict):
        kept["config"] = {**kept["config"], "debugger": {**debugger, "args": _without_policies(debugger["args"])}}
    return kept


def _without_policies(args: dict) -> dict:
    """A described ``SequentialDebugger`` args without ``keep`` (its own and each entry's) and
    ``summaries_every_epoch``."""
    args = {k: v for k, v in args.items() if k not in UNIDENTIFYING_DEBUGGER_ARGS}
    if isinstance(args.get("debuggers_config"), list):
        args["debuggers_config"] = [{k: v for k, v in entry.items() if k != "keep"} if isinstance(entry, dict)
                                    else entry for entry in args["debuggers_config"]]
    return args


def _read_run_info(path: str) -> dict:
    try:
        info = read_json(path)
    except ValueError as exc:
        raise WorkDirError(f"{path} is damaged ({exc}); if this folder is a Lantern run, delete that file only "
                           "if you are sure the config is unchanged, otherwise choose another 'work_dir'") from exc
    if not isinstance(info, dict):
        raise WorkDirError(f"{path} is not a Lantern {RUN_INFO_FILE}; choose another 'work_dir'")
    return info
