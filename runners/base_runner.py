"""What trainer and evaluator share: work dir, logging, seeds, device, model,
metric, debugger and the evaluation loop with its ``_eval_step``.

Subclasses define ``_init_components_`` (the order of the ``_init_*`` calls, as
in the design doc) and ``run``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import random
import re
import shutil
import socket
import time
import uuid
from collections.abc import Callable, Sized
from typing import Any, Optional

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset
from tqdm import tqdm

from analysis.epoch_rows import EpochRows, gather_epoch_columns
from analysis.epoch_table import write_epoch_table
from debuggers.model_report import build_model_report, refresh_conv_filters, write_model_report
from debuggers.pages.watchdog import DEFAULT_STALL_TIMEOUT_S
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from run_dir.names import DATAPOINTS_DIR, EPOCH_GLOB, LOCK_FILE, MODEL_REPORT_FILE, RUN_INFO_FILE, RUNNER_LOG
from run_dir.run_log import append_to_log, get_run_logger
from runners.config_file import config_differences, describe_config
from runners.config_keys import check_config_keys
from runners.datapoint_capture import CaptureLimits, DatapointCapture, capture_is_complete
from runners.failure_definition import FAILURE_DEFINITION_ROLE, checked_failure_definition
from runners.findings_worker import BackgroundFindings
from runners.metric_contract import check_buffer, check_scores, checked_summary
from runners.unique_idx import SeenIdx, merge_rank_buffers
from runners.work_dir_guard import WorkDirWatch, lock_work_dir, recorded_launch, release_work_dir
from utils import distributed
from utils.atomic_files import TEMP_MARKER, atomic_write_json, read_json
from utils.builders import build_from_config
from utils.errors import (
    ConfigError,
    DatasetContractError,
    ModelContractError,
    UserCodeError,
    WorkDirError,
    describe_exception,
)
from utils.folder_glob import glob_in
from utils.ops import apply_tensor_op, describe_value, idx_list

_STALE_TEMP = re.compile(rf"\..+{re.escape(TEMP_MARKER)}[\d-]+")  # utils.atomic_files.temporary_path
# moving a run or its config file, changing how long ranks wait for each other, what is captured of each
# datapoint, the debug disk budget, the capture policies, the training monitor or what counts as a failure keeps it
# the same run: they change what is captured and how it is read, not what is trained (a run the monitor stopped at
# a NaN resumes with it set to go on)
UNIDENTIFYING_KEYS = ("work_dir", "config_filepath", "distributed_timeout_s", "datapoint_capture",
                      "debug_disk_budget_gb", "training_monitor", "failure_definition", "failure_analysis")
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
        self.debugger: Optional[SequentialDebugger] = None
        self.capture_limits = CaptureLimits.from_config(config.get("datapoint_capture"))
        self.datapoint_capture: Optional[DatapointCapture] = None
        self._capture_stuck = False  # a capture's writer hung: no more captures in this run
        self._work_dir_watch: Optional[WorkDirWatch] = None  # rank 0, once the work dir exists
        # dataset[0] of the evaluated dataset as collated at start-up, until the debugger's start-up (the model
        # report) has used it: a user's __getitem__ may be slow (a big image, network storage)
        self._first_eval_batch: Any = None
        self.rank, self.world_size = 0, 1
        self.launch: Optional[str] = None  # this launch's id, once recorded in run_info.json (see log_stop)
        self._seen_idx = SeenIdx(0)  # meta_info['idx'] of this evaluation pass (runners/unique_idx.py)
        self._metric_checked = False  # on the first batch this process scores, see _check_metric
        self.stage = "start-up"  # then "epoch N training", ...: said when the run stops (main.py)
        self.failure_analysis = config.get("failure_analysis", True)
        if not isinstance(self.failure_analysis, bool):
            raise ConfigError(f"config['failure_analysis'] must be True (analyse each validation epoch's failures in "
                              f"the background, for the viewer's Failures tab) or False, got {self.failure_analysis!r}")
        self._findings: Optional[BackgroundFindings] = None  # rank 0, from the first analysed epoch

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
        self.rank, self.world_size = distributed.init_distributed(self.device, self._distributed_timeout_s())

    def _distributed_timeout_s(self) -> float:
        timeout = self.config.get("distributed_timeout_s", distributed.DEFAULT_TIMEOUT_S)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ConfigError(f"config['distributed_timeout_s'] must be a positive number of seconds (how long a "
                              f"rank waits for the others before giving up), got {timeout!r}")
        return float(timeout)

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
        self.model = model.to(self.device)

    def _init_metric_(self) -> None:
        self.metric = build_from_config(self.config["metric"], "config['metric']")
        self.failure_definition = checked_failure_definition(self.config.get("failure_definition"), self.metric)

    def _init_debugger(self) -> None:
        """Build the debugger once the model exists; unknown layer names stop the run here."""
        first_batch, self._first_eval_batch = self._first_eval_batch, None  # needed no longer, whatever follows
        if not self.config.get("debugger"):
            self.debugger = None
            return
        self.debugger = build_from_config(self.config["debugger"], "config['debugger']")
        if not isinstance(self.debugger, SequentialDebugger):
            raise ConfigError(
                f"config['debugger'] must build a SequentialDebugger, got {type(self.debugger).__name__}; "
                "wrap your debuggers in {'class': SequentialDebugger, 'args': {'debuggers_config': [...]}}"
            )
        self.debugger.register_hooks(self.eval_model, logger=self.logger)
        self.debugger.capture_policy.use_metric_directions(getattr(self.metric, "HIGHER_IS_BETTER", {}))
        self.logger.info(f"Debugger ready: {list(self.debugger.debuggers)}; full outputs kept: "
                         f"{self.debugger.capture_policy.describe()}")
        self._write_model_report_(first_batch)

    def _write_model_report_(self, first_batch: Any) -> None:
        """Parameters and FLOPs of the model, once per run (rank 0), on the first eval datapoint (collated at
        start-up); never fatal."""
        path = os.path.join(self.work_dir, MODEL_REPORT_FILE)
        if not self.is_main or os.path.exists(path):
            return
        if first_batch is None:
            self.logger.warning(f"model report not written: config['{self.EVAL_DATASET_KEY}'] has no datapoint 0 "
                                "to measure the model on (an IterableDataset, an empty one, or batch_size=None)")
            return
        try:
            inputs = apply_tensor_op(lambda t: t.to(self.device), first_batch["inputs"])
            write_model_report(path, build_model_report(self.eval_model, inputs))
        except Exception as exc:  # the report only informs; the run must not stop for it
            self.logger.warning(f"model report not written ({type(exc).__name__}: {exc})")

    def _refresh_model_report(self, taken_at: str) -> None:
        """The model report's conv filters as the weights are now (rank 0, where a report was written); never
        fatal."""
        path = os.path.join(self.work_dir, MODEL_REPORT_FILE)
        if not self.is_main or not os.path.isfile(path):
            return
        try:
            refresh_conv_filters(path, self.eval_model, taken_at)
        except Exception as exc:  # the report only informs; the run must not stop for it
            self.logger.warning(f"model report's conv filters not refreshed ({type(exc).__name__}: {exc})")

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
        loader = build_from_config(entry, f"config['{dataloader_key}']", dataset=dataset, sampler=sampler(dataset))
        first_batch = _check_first_datapoint(loader, dataset_key)
        if dataset_key == self.EVAL_DATASET_KEY:
            self._first_eval_batch = first_batch
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
        if self.datapoint_capture is not None:
            self.datapoint_capture.add_batch(dp)
        dp = apply_tensor_op(lambda t: t.to(self.device, non_blocking=True), dp)
        debugging = self.debugger is not None and self.debugger.enabled
        with self.debugger.watch_forward() if debugging else contextlib.nullcontext():  # hooks run in there
            dp["outputs"] = self._forward(self.eval_model, dp["inputs"])
        scores = self.metric(dp["outputs"], dp["labels"])
        if first_batch:
            check_scores(scores, self.metric)
        if self.debugger is not None and first_batch:  # a wrong keep score name stops the run here
            self.debugger.capture_policy.check_scores(scores, len(idx))
        self.metric.add_to_buffer(idx, scores)
        self.epoch_rows.add_batch(dp)
        if debugging:
            dp["scores"] = scores  # the capture policy decides whose outputs to keep from them
            dp["debug"] = self.debugger(dp, self.eval_model)

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
                f"{type(self.eval_model).__name__}.forward returned {describe_value(outputs)}, but Lantern's models "
                "return a dict of named outputs: forward(inputs: dict) -> dict. The criterion and the metric read "
                "it by key (CrossEntropyCriterion and ClassificationMetric read outputs['logits'], set by their "
                "output_key argument). Return e.g. {'logits': logits} from forward; see docs/your_project.md")
        return outputs

    def _eval_loop(self, dataloader: DataLoader, desc: str, table_path: str) -> dict:
        """Run every batch through ``_eval_step``; write the epoch table at ``table_path``; return the scores
        of all ranks."""
        self.eval_model.eval()
        self.metric.reset_buffer()
        check_buffer(self.metric)
        self._seen_idx = SeenIdx(len(dataloader.dataset) if isinstance(dataloader.dataset, Sized) else 0)
        self.epoch_rows = EpochRows.for_metric(self.metric)
        with torch.no_grad():
            for dp in tqdm(dataloader, desc=desc, leave=False, disable=not self.is_main):
                self._eval_step(dp)
        every_rank = merge_rank_buffers(distributed.gather_objects(self.metric.buffer))
        scores = checked_summary(self.metric.summarize(every_rank), self.metric)
        self._write_epoch_table(table_path, scores, dataloader.dataset)
        return scores

    def _write_epoch_table(self, path: str, scores: dict, dataset: Any) -> None:
        """One row per datapoint (see analysis/epoch_table.py), written by rank 0 from every rank's rows."""
        summaries = self.debugger.summaries if self.debugger is not None and self.debugger.enabled else None
        class_names = getattr(dataset, "class_names", None) or getattr(dataset, "CLASS_NAMES", None)
        gathered = gather_epoch_columns(scores, self.epoch_rows, summaries, class_names, self.is_main)
        if gathered is not None:
            if self.failure_definition is not None:
                gathered[1][FAILURE_DEFINITION_ROLE] = self.failure_definition
            write_run_file(path, lambda: write_epoch_table(path, *gathered))

    def _start_datapoint_capture(self, once: bool) -> None:
        """Record what the viewer shows of each datapoint evaluated next (runners.datapoint_capture);
        ``once``: keep a capture this run already completed (a trainer's validation set)."""
        folder = os.path.join(self.work_dir, DATAPOINTS_DIR)
        if self.capture_limits is None or self._capture_stuck or (once and capture_is_complete(folder)):
            return
        stall_timeout_s = self.debugger.stall_timeout_s if self.debugger is not None else DEFAULT_STALL_TIMEOUT_S
        self.datapoint_capture = DatapointCapture(folder, self.capture_limits, self.logger, self.rank,
                                                  self.world_size, stall_timeout_s)

    def _finish_datapoint_capture(self) -> None:
        if self.datapoint_capture is not None:
            self.datapoint_capture.finish()
            self._capture_stuck = self.datapoint_capture.stuck
            self.datapoint_capture = None

    def _start_debug_capture(self, debugger_dir: str, full_outputs: bool = True) -> None:
        """Enable the debugger for one pass, writing pages into an emptied ``debugger_dir`` (with
        ``full_outputs=False`` it collects only the summaries, and writes no page)."""
        if self.is_main and os.path.isdir(debugger_dir):
            shutil.rmtree(debugger_dir)
        distributed.barrier()
        self.debugger.reset_buffer(debugger_dir, full_outputs=full_outputs)
        self.debugger.enabled = True

    def _finish_debug_capture(self, debugger_dir: str) -> None:
        """Write the last pages; return once every rank has, so an epoch marked done has all its pages."""
        full_outputs = self.debugger.full_outputs
        summary = self.debugger.save_all(debugger_dir)
        self.debugger.enabled = False
        if "error" in summary:
            self.logger.error(f"Debug outputs in {debugger_dir} are incomplete: {summary['error']}")
        if full_outputs:  # every rank's pages: rank 0 writes only its share under torchrun
            parts = distributed.gather_objects([summary[key] for key in ("datapoints", "pages", "bytes")])
            datapoints, pages, size = (sum(values) for values in zip(*parts))
            self.logger.info(f"Debug outputs: {datapoints} datapoints in {pages} page(s), {size / 2**20:.1f} MB "
                             f"in {debugger_dir}")
        distributed.barrier("waiting for every rank to write its debug pages")

    def _check_work_dir(self, about_to: str) -> None:
        """Stop (rank 0) if the work dir was deleted or replaced since the run started."""
        if self._work_dir_watch is not None:
            self._work_dir_watch.check(about_to)

    def _store_findings(self, epoch_dir: str) -> None:
        """Rank 0: analyse the failures of the epoch in ``epoch_dir`` off the training thread and store them there
        for the viewer (runners/findings_worker.py), unless ``config['failure_analysis']`` is False."""
        if not self.is_main or not self.failure_analysis:
            return
        if self._findings is None:
            self._findings = BackgroundFindings(self.logger)
        self._findings.submit(epoch_dir)

    def _close(self) -> None:
        if self._findings is not None:
            self._findings.close()
        release_work_dir(self.work_dir)
        if self.datapoint_capture is not None:
            self.datapoint_capture.close()
        if self.debugger is not None:
            self.debugger.close()


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def write_scores(path: str, scores: dict) -> None:
    """Scores files are strict JSON: NaN is written as null so any reader accepts them."""
    write_run_file(path, lambda: atomic_write_json(path, _nan_to_none(scores)))


def write_run_file(path: str, write: Callable[[], None]) -> None:
    """Run ``write``, an atomic write of ``path``; a failed write stops the run saying what to do."""
    try:
        write()
    except (OSError, RuntimeError) as exc:  # torch.save reports a full disk as a RuntimeError
        folder = os.path.dirname(os.path.abspath(path))
        space = f"; {shutil.disk_usage(folder).free / 2**20:.1f} MB free there" if os.path.isdir(folder) else ""
        raise WorkDirError(
            f"cannot write {path} ({type(exc).__name__}: {exc}{space}). Nothing earlier is lost. Free disk space "
            "or make the folder writable (a file may stand where a folder should be), then run the same command "
            "again (training resumes after its last finished epoch)"
        ) from exc


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


def _check_first_datapoint(loader: DataLoader, dataset_key: str) -> Any:
    """Collate ``dataset[0]`` here, in the main process, before any epoch: a dataset that breaks the datapoint
    contract is refused at once, in one line naming the dataset, not later from inside a DataLoader worker.
    Returns that batch of one, or None where there is no datapoint 0 to check."""
    dataset = loader.dataset
    if loader.batch_sampler is None or isinstance(dataset, IterableDataset) or len(dataset) == 0:
        return None  # no batches of datapoints to check, or no datapoint 0
    where = f"config['{dataset_key}'] ({type(dataset).__name__}), dataset[0]"
    try:
        return loader.collate_fn([dataset[0]])
    except DatasetContractError as exc:
        raise DatasetContractError(f"{where}: {exc}") from None
    except Exception as exc:  # the project's __getitem__ or collate_fn: one line here, the traceback in the log
        raise UserCodeError(f"{where}: {describe_exception(exc)}") from exc


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
