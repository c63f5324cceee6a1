"""Gradient accumulation under real ``torchrun`` (2 processes, gloo): the ranks all-reduce on a window's last batch
only, and a step over 2 ranks x 2 batches of 16 is the full-batch step over the 64 datapoints that one process
takes with batches of 64 (a model without BatchNorm: the order of the datapoints does not matter)."""

from __future__ import annotations

import pytest
import torch

from runners.checkpoints import load_checkpoint_file
from runners.config_file import load_config
from runners.trainers import BaseTrainer
from tests.runners.test_training_step import MLP, batch_size
from tests.runs import one_thread, run_torchrun, write_config

pytestmark = pytest.mark.slow  # runs in .ci/run's second command (README: the slow tests)


@pytest.mark.timeout(200)
def test_accumulated_steps_over_two_ranks_are_the_full_batch_step(tmp_path):
    accumulated = write_config(tmp_path / "ddp.py", tmp_path / "ddp", epochs=2, extra=MLP + batch_size(16)
                               + 'config["gradient_accumulation_steps"] = 2\n'
                               + 'config["training_monitor"] = {"every_n_steps": 1}\n')
    result = run_torchrun(accumulated)
    assert result.returncode == 0, result.stdout
    full_batch = write_config(tmp_path / "one.py", tmp_path / "one", epochs=2, extra=MLP + batch_size(64))
    with one_thread():
        BaseTrainer(load_config(full_batch)).run()
    for epoch in range(2):
        ddp = load_checkpoint_file(str(tmp_path / "ddp" / f"epoch_{epoch}" / "checkpoint.pt"))["model_state_dict"]
        one = load_checkpoint_file(str(tmp_path / "one" / f"epoch_{epoch}" / "checkpoint.pt"))["model_state_dict"]
        for name, value in one.items():
            torch.testing.assert_close(ddp[name], value, rtol=1e-5, atol=1e-6)
