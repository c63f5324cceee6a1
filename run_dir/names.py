"""The name of every file and folder a run writes, each defined here once: the runners write by these names and
every reader (analysis, viewer, export, verify) finds the files by them."""

from __future__ import annotations

import re
from typing import Optional, Union

# the run folder (a trainer's or an evaluator's work dir)
RUN_INFO_FILE = "run_info.json"  # which config the run belongs to, and which launch wrote it
PROGRESS_FILE = "progress.json"  # a trainer's epochs done and its best epoch, written last in each epoch
LOCK_FILE = ".lantern.lock"  # held by the running process; hidden, so a run's files can be removed around it
TRAINER_LOG = "train.log"
EVALUATOR_LOG = "eval.log"
RUNNER_LOG = "run.log"  # a runner that is neither (other ranks' logs: ``run_log.log_path``)
MONITOR_FILE = "training_monitor.bin"
TENSORBOARD_DIR = "tensorboard"  # the training monitor's TensorBoard event files, when asked for
PROFILER_TRACE_FILE = "profiler_trace.json.gz"  # torch.profiler's trace of the chosen steps (Chrome/Perfetto)
PROFILER_SUMMARY_FILE = "profiler_summary.json"  # the ops that took the most time in those steps
MODEL_REPORT_FILE = "model_report.json"
DATAPOINTS_DIR = "datapoints"  # each validation datapoint's inputs, labels and meta info, for the viewer
ITEM_KEYS = ("inputs", "labels", "meta_info")  # the parts of a datapoint captured there
EVALUATION_SCORES_FILE = "evaluation_scores.json"  # an evaluator's scores, in the run folder itself
TAGS_FILE = "tags.json"  # the names people give datapoints in the viewer, by idx (``tags_file``)
TAGS_LOCK_FILE = ".tags.lock"  # held while a viewer changes the tags; hidden, like the run's own lock

# an epoch's folder (a trainer's epoch_N, or an evaluator's run folder)
VALIDATION_SCORES_FILE = "validation_scores.json"
EPOCH_TABLE_FILE = "epoch_table.parquet"
FINDINGS_FILE = "findings.json"
CHECKPOINT_FILE = "checkpoint.pt"
TRAINING_LOSSES_FILE = "training_losses.pt"
DEBUGGER_DIR = "debugger"  # the debug pages
REMOVED_MARKER = "debugger_removed.json"  # what the disk budget removed, and why
REMOVING_DIR = ".debugger.removing"  # the pages while the budget deletes them; hidden from readers
EMBEDDINGS_DIR = "embeddings"  # the stored 2-D maps of the epoch's feature spaces (``embedding_file``)

_EPOCH_PREFIX = "epoch_"
EPOCH_GLOB = _EPOCH_PREFIX + "*"
_EPOCH_NAME = re.compile(re.escape(_EPOCH_PREFIX) + r"(\d+)")


def epoch_dir_name(epoch: Union[int, str]) -> str:
    """``epoch_N``: the folder of a trainer's epoch ``N`` (``"N"`` itself where a message names any epoch)."""
    return f"{_EPOCH_PREFIX}{epoch}"


def epoch_number(name: str) -> Optional[int]:
    """N for a folder named ``epoch_N``, None for any other name."""
    match = _EPOCH_NAME.fullmatch(name)
    return int(match.group(1)) if match else None
