"""Real ``torchrun`` runs on the CPU (gloo): 2 processes give what 1 process gives, every idx exactly once.

Shards are uneven on purpose (25 datapoints, batches of 4: rank 0 runs 4 batches, rank 1 runs 3), so a
collective call per batch or per datapoint would hang and fail the test by its timeout.
"""

from __future__ import annotations

import glob
import json
import os
import time

import numpy as np
import pytest
import torch

from analysis.epoch_table import EpochTable
from analysis.findings import load_findings
from debuggers.pages.file_format import PAGE_GLOB, load_page
from debuggers.pages.index import read_index
from run_dir.names import EPOCH_TABLE_FILE
from runners.config_file import load_config
from runners.eval_viewer.backend.initialization import load_debug_outputs
from runners.evaluators import BaseEvaluator
from tests.runs import run_torchrun, write_config

pytestmark = pytest.mark.slow  # runs in .ci/run's second command (README: the slow tests)

VAL_SIZE = 25

DEBUGGER = """
import os
import time

from data.datasets import SyntheticShapesDataset
from debuggers.base_debugger import BaseDebugger
from debuggers.forward_debugger import ForwardDebugger
from runners.evaluators import BaseEvaluator


class Features(ForwardDebugger):
    def process_forward(self, module, input, output):
        return {"features": output.detach(), "mean": output.detach().mean(dim=(1, 2, 3))}

    def summary(self, output):
        return {"mean": float(output["mean"])}


class Logits(BaseDebugger):
    def __call__(self, datapoint, model):
        return datapoint["outputs"]["logits"]


config["debugger"] = {"class": SequentialDebugger, "args": {"page_size_mb": 0.002, "debuggers_config": [
    {"name": "features", "debugger_config": {"class": Features, "args": {"layer_name": "backbone.layer2"}}},
    {"name": "logits", "debugger_config": {"class": Logits, "args": {}}},
]}}
"""

EVALUATOR = """
config = {"runner": BaseEvaluator, "work_dir": config["work_dir"], "seed": config["seed"],
          "model": config["model"], "metric": config["metric"], "debugger": config["debugger"],
          "eval_dataset": config["val_dataset"], "eval_dataloader": config["val_dataloader"],
          "checkpoint": CHECKPOINT}
"""


def config_file(tmp_path, name, extra="", **options):
    options = {"val_size": VAL_SIZE, "val_batch": 4, "train_size": 40, **options}
    return write_config(tmp_path / f"{name}.py", tmp_path / name, extra=DEBUGGER + extra, **options)


def evaluator_file(tmp_path, name, checkpoint=None):
    return config_file(tmp_path, name, f"CHECKPOINT = {checkpoint!r}\n" + EVALUATOR)


def read_scores(path):
    with open(path) as f:
        return json.load(f)


def assert_every_idx_once(debugger_dir, world_size):
    """Each rank wrote its own pages and index; together they hold every idx exactly once."""
    pages = sorted(glob.glob(os.path.join(debugger_dir, PAGE_GLOB)))
    seen = [idx for path in pages for idx in load_page(path)]
    assert sorted(seen) == list(range(VAL_SIZE)), "an idx is missing or duplicated across the pages"
    assert not [n for n in os.listdir(debugger_dir) if ".tmp-" in n]
    if world_size > 1:
        assert {os.path.basename(p).split("_")[1] for p in pages} == {f"rank{r}" for r in range(world_size)}
        indexes = [read_index(os.path.join(debugger_dir, f"index_rank{r}.json")) for r in range(world_size)]
        assert all(index["complete"] for index in indexes)
        assert indexes[0]["pages"] > 1 and indexes[1]["pages"] > 1
    outputs = load_debug_outputs(os.path.dirname(debugger_dir))
    assert outputs.complete and list(outputs) == list(range(VAL_SIZE))
    return outputs


def assert_same_outputs(a, b):
    for idx in range(VAL_SIZE):
        pairs = {"features": (a[idx]["features"]["features"], b[idx]["features"]["features"]),
                 "mean": (a[idx]["features"]["mean"], b[idx]["features"]["mean"]),
                 "logits": (a[idx]["logits"], b[idx]["logits"])}
        for name, (x, y) in pairs.items():
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6, err_msg=f"idx {idx} {name}")


def assert_same_epoch_table(a_dir, b_dir):
    """Rank 0 wrote one table holding every rank's rows: the same as one process's."""
    a, b = (EpochTable(os.path.join(d, EPOCH_TABLE_FILE)).page(limit=VAL_SIZE + 1) for d in (a_dir, b_dir))
    assert [row["idx"] for row in a] == [row["idx"] for row in b] == list(range(VAL_SIZE))
    assert "features.mean" in a[0]
    for row_a, row_b in zip(a, b):
        assert row_a.keys() == row_b.keys()
        for column, value in row_a.items():  # numbers to float rounding; names and missing values exactly
            expected = row_b[column]
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                assert value == pytest.approx(expected, rel=1e-5, abs=1e-6), (row_a["idx"], column)
            else:
                assert value == expected, (row_a["idx"], column)


def assert_same_scores(a, b):
    assert a["datapoint_idx"] == b["datapoint_idx"] == list(range(VAL_SIZE))
    for name, values in a["per_datapoint"].items():
        assert values == pytest.approx(b["per_datapoint"][name], rel=1e-5, abs=1e-6), name


@pytest.mark.timeout(150)
def test_evaluation_with_2_processes_equals_1_process(tmp_path):
    single = load_config(evaluator_file(tmp_path, "single"))
    BaseEvaluator(single).run()
    result = run_torchrun(evaluator_file(tmp_path, "ddp"))
    assert result.returncode == 0, result.stdout
    assert result.stdout.count("Results are in") == 1

    ddp_dir = str(tmp_path / "ddp")
    assert_same_scores(read_scores(os.path.join(ddp_dir, "evaluation_scores.json")),
                       read_scores(os.path.join(single["work_dir"], "evaluation_scores.json")))
    assert_same_outputs(assert_every_idx_once(os.path.join(ddp_dir, "debugger"), world_size=2),
                        assert_every_idx_once(os.path.join(single["work_dir"], "debugger"), world_size=1))
    assert_same_epoch_table(ddp_dir, single["work_dir"])
    assert sorted(n for n in os.listdir(ddp_dir) if n.endswith(".log")) == ["eval.log", "eval_rank1.log"]
    assert f"Debug outputs: {VAL_SIZE} datapoints" in open(os.path.join(ddp_dir, "eval.log")).read()  # all ranks'


@pytest.mark.timeout(150)
def test_training_with_2_processes_debugs_every_idx_once_and_validates_its_checkpoint(tmp_path):
    result = run_torchrun(config_file(tmp_path, "train", epochs=2, checkpoint_method="all"))
    assert result.returncode == 0, result.stdout
    work_dir = str(tmp_path / "train")
    assert read_scores(os.path.join(work_dir, "progress.json"))["completed_epochs"] == 2
    for epoch in range(2):
        epoch_dir = os.path.join(work_dir, f"epoch_{epoch}")
        outputs = assert_every_idx_once(os.path.join(epoch_dir, "debugger"), world_size=2)
        torch.load(os.path.join(epoch_dir, "checkpoint.pt"), weights_only=True)
        stored = load_findings(epoch_dir)
        assert stored is not None and stored.datapoints == VAL_SIZE  # by rank 0, from every rank's rows
    log = open(os.path.join(work_dir, "train.log")).read()
    assert log.count("findings of") == 2  # once an epoch, not a rank
    # rank 0 says what every rank captured (13 + 12 of the 25), once: the capture is complete after epoch 0
    assert log.count(f"Captured the inputs, labels and meta info of {VAL_SIZE} datapoints for the viewer by 2 "
                     "ranks") == 1 and "Captured" not in open(os.path.join(work_dir, "train_rank1.log")).read()
    # Every rank validated exactly the model rank 0 saved (BatchNorm statistics included).
    checkpoint = os.path.join(work_dir, "epoch_1", "checkpoint.pt")
    evaluation = load_config(evaluator_file(tmp_path, "check", checkpoint=checkpoint))
    BaseEvaluator(evaluation).run()
    assert_same_scores(read_scores(os.path.join(work_dir, "epoch_1", "validation_scores.json")),
                       read_scores(os.path.join(evaluation["work_dir"], "evaluation_scores.json")))
    assert_same_outputs(outputs, load_debug_outputs(evaluation["work_dir"]))


HANGING_RANK = """
class HangsOnRank1(SyntheticShapesDataset):
    def __getitem__(self, idx):
        if os.environ.get("RANK") == "1" and idx != 0:  # dataset[0] is read at start-up; hang in validation
            time.sleep(600)
        return super().__getitem__(idx)


config["val_dataset"]["class"] = HangsOnRank1
config["distributed_timeout_s"] = 5
"""


@pytest.mark.timeout(120)
def test_a_hanging_rank_ends_the_run_with_a_clear_error_after_the_timeout(tmp_path):
    start = time.monotonic()
    result = run_torchrun(config_file(tmp_path, "hang", HANGING_RANK, epochs=1, train_size=16), timeout=90)
    assert result.returncode != 0
    assert "error (rank 0): rank 0 of 2 gave up gathering results from every rank" in result.stdout
    assert "config['distributed_timeout_s'] (now 5 s)" in result.stdout
    assert time.monotonic() - start < 80


REPEATING_IDX = """
class RepeatsOnEachRank(SyntheticShapesDataset):
    def __getitem__(self, idx):
        dp = super().__getitem__(idx)
        dp["meta_info"]["idx"] = idx % 8  # rank r reads r, r+2, ...: its 5th datapoint (2nd batch) repeats its 1st
        return dp


config["val_dataset"]["class"] = RepeatsOnEachRank
"""


@pytest.mark.timeout(120)
def test_an_idx_repeated_on_each_rank_stops_each_rank_in_one_line_in_its_log_too(tmp_path):
    result = run_torchrun(config_file(tmp_path, "repeat", REPEATING_IDX, epochs=1, train_size=16), timeout=90)
    assert result.returncode != 0  # torchrun itself then prints a traceback of its ChildFailedError
    for rank, log in ((0, "train.log"), (1, "train_rank1.log")):
        message = f"meta_info['idx']={rank} came twice in one evaluation pass; meta_info['idx'] must be unique"
        assert f"error (rank {rank}): {message}" in result.stdout
        with open(tmp_path / "repeat" / log) as f:
            stops = [line for line in f.read().splitlines()
                     if " stopped during epoch 0 validation (exit code 2): " in line]
        assert len(stops) == 1 and f"[rank {rank}] ERROR process " in stops[0] and message in stops[0], stops



RAISES_ON_RANK_1 = """
class RaisesOnRank1(SyntheticShapesDataset):
    def __getitem__(self, idx):
        if os.environ.get("RANK") == "1" and idx > 2:
            raise ValueError("planted failure on rank 1")
        return super().__getitem__(idx)


config["train_dataset"]["class"] = RaisesOnRank1
"""


@pytest.mark.timeout(120)
def test_an_error_on_one_rank_ends_every_rank_s_log_with_its_stop(tmp_path):
    """Rank 1's dataset raises mid-epoch: its log ends with that error, naming the datapoint, and its traceback;
    rank 0, whose collective then fails (or whom torchrun ends), says so at the end of its own log, and that the rank
    that stopped first says why in its log (a gloo 'Connection closed by peer' alone sent the reader to report a
    Lantern bug). Before, both logs just ended."""
    result = run_torchrun(config_file(tmp_path, "raises", RAISES_ON_RANK_1, epochs=1, train_size=32), timeout=90)
    assert result.returncode != 0
    for rank, log in ((0, "train.log"), (1, "train_rank1.log")):
        with open(tmp_path / "raises" / log) as f:
            text = f.read()
        last = text.splitlines()[-1]
        assert f"[rank {rank}] ERROR process " in last and " stopped during epoch 0 training (exit code " in last, last
        if rank == 0:
            assert "one of 2 processes: the first rank to stop" in last and "train_rank1.log" in last, last
    assert "config['train_dataset'] (RaisesOnRank1), dataset[" in last, last
    assert "ValueError: planted failure on rank 1" in last
    assert 'raise ValueError("planted failure on rank 1")' in text  # the traceback
