"""The training monitor under real ``torchrun`` (2 processes, gloo): rank 0 alone writes the file, its losses are
the mean over ranks the trainer logs, and a NaN in one rank's batch stops every rank at the same step (no rank
left waiting in a collective), named with that rank's idx and layer."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from torch.utils.data import DistributedSampler

from run_dir.names import MONITOR_FILE
from run_dir.training_log import read_training_log
from runners.config_file import load_config
from tests.runners.test_training_monitor_runs import BATCH, NAN_ON_SATURATED
from tests.runs import run_torchrun, write_config
from utils.builders import build_from_config

pytestmark = pytest.mark.slow  # runs in .ci/run's second command (README: the slow tests)

TRAIN_SIZE = 128  # 4 steps per rank: rank 1's batch at step 1 holds a saturated image, rank 0's only at step 2


def first_nonfinite(config: dict) -> tuple[int, int, list[int]]:
    """(step, rank, saturated idx) of the first step where a rank's batch holds a saturated image."""
    dataset = build_from_config(config["train_dataset"], "train_dataset")
    hits = []
    for rank in range(2):
        sampler = DistributedSampler(dataset, 2, rank, shuffle=True, seed=config["seed"])
        sampler.set_epoch(0)
        order = list(sampler)
        hits += [(i // BATCH, rank, sorted(j for j in order[i:i + BATCH] if dataset.planted(j).saturated))
                 for i in range(0, len(order), BATCH)]
    return min(hit for hit in hits if hit[2])


def monitored_config(tmp_path, name: str, action: str) -> str:
    extra = NAN_ON_SATURATED + f'config["train_dataset"]["args"]["saturated_fraction"] = 0.02\n' \
        f'config["training_monitor"] = {{"every_n_steps": 1, "on_nonfinite": {action!r}}}\n'
    return write_config(tmp_path / f"{name}.py", tmp_path / name, epochs=1, train_size=TRAIN_SIZE, val_size=8,
                        extra=extra)


@pytest.mark.timeout(200)
def test_a_nan_on_one_rank_stops_every_rank_naming_its_idx(tmp_path):
    path = monitored_config(tmp_path, "stop", "stop")
    config = load_config(path)
    step, rank, idx = first_nonfinite(config)
    assert (step, rank) == (1, 1)  # rank 0's batch at that step is clean: the report must come from rank 1
    stopped = run_torchrun(path)
    assert stopped.returncode != 0
    assert f"non-finite training step {step}" in stopped.stdout
    assert f"'backbone.layer1.overflow' (OverflowGate), for idx {idx}" in stopped.stdout
    log = read_training_log(os.path.join(config["work_dir"], MONITOR_FILE))
    assert [(e.step, e.first_layer_idx) for e in log.events] == [(step, idx)]
    assert sorted(os.listdir(config["work_dir"])).count(MONITOR_FILE) == 1


@pytest.mark.timeout(200)
def test_rank_0_writes_the_mean_loss_over_ranks_the_trainer_logs(tmp_path):
    path = monitored_config(tmp_path, "warn", "warn")
    config = load_config(path)
    done = run_torchrun(path)
    assert done.returncode == 0, done.stdout
    log = read_training_log(os.path.join(config["work_dir"], MONITOR_FILE))
    logged = torch.load(os.path.join(config["work_dir"], "epoch_0", "training_losses.pt"), weights_only=True)
    np.testing.assert_allclose(log.losses, logged.numpy(), rtol=1e-6, equal_nan=True)
    assert log.settings["world_size"] == 2 and log.events[0].step == first_nonfinite(config)[0]
    assert [name for name in os.listdir(config["work_dir"]) if "monitor" in name] == [MONITOR_FILE]
