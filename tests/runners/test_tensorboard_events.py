"""``config['training_monitor']['tensorboard']``: a real short run's event files, read back with TensorBoard's own
EventAccumulator, hold every training step's loss (as the trainer's losses file has them), the learning rate, each
layer's histograms and each epoch's validation scores (as its scores file has them); a resumed run leaves each step
once."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
import torch

from run_dir import RunDir
from runners.config_file import load_config
from runners.trainers import BaseTrainer
from tests.runs import one_thread, write_config
from utils.atomic_files import read_json

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

MONITORED = 'config["training_monitor"] = {"every_n_steps": 2, "tensorboard": True}\n'


def train(path):
    with one_thread():
        BaseTrainer(load_config(path)).run()


def events(run: RunDir) -> EventAccumulator:
    accumulator = EventAccumulator(run.tensorboard, size_guidance={"scalars": 0, "histograms": 0})
    accumulator.Reload()
    return accumulator


def test_the_event_files_hold_what_the_run_recorded(tmp_path):
    path = write_config(tmp_path / "c.py", tmp_path / "w", epochs=2, extra=MONITORED)
    train(path)
    run = RunDir(str(tmp_path / "w"))
    recorded = events(run)
    tags = recorded.Tags()
    losses = [(event.step, event.value) for event in recorded.Scalars("Loss/train_batch")]
    expected = torch.cat([torch.load(run.epoch(e).training_losses) for e in range(2)])
    assert [step for step, _ in losses] == list(range(8))  # 64 datapoints in batches of 16, 2 epochs
    np.testing.assert_allclose([value for _, value in losses], expected.numpy(), rtol=1e-6)
    epoch_means = [event.value for event in recorded.Scalars("Loss/train")]
    np.testing.assert_allclose(epoch_means, [float(expected[:4].mean()), float(expected[4:].mean())], rtol=1e-5)
    for epoch, event in enumerate(recorded.Scalars("val/accuracy")):
        assert event.value == pytest.approx(read_json(run.epoch(epoch).scores)["aggregated"]["accuracy"])
        assert event.step == 4 * (epoch + 1)
    assert [event.value for event in recorded.Scalars("LR")][0] == pytest.approx(0.05)  # the config's SGD
    assert {"weights/backbone.layer1.conv", "gradients/head.fc"} <= set(tags["histograms"])
    weights = recorded.Histograms("weights/head.fc")[-1].histogram_value
    assert weights.num == 6 * 16 + 6  # head.fc's weight and bias, every value counted once
    assert "grad_norm/backbone.layer4.conv" in tags["scalars"]


CRASH = MONITORED + """
import os


class CrashOnce(SyntheticShapesDataset):
    def __getitem__(self, i):
        # after dataset[0] at start-up, epoch 0 and 2 batches of epoch 1
        if os.environ.get("CRASH_IN_EPOCH_1") and self.epoch_reads > 1 + 64 + 32:
            raise RuntimeError("simulated crash in epoch 1")
        self.epoch_reads += 1
        return super().__getitem__(i)

    epoch_reads = 0


config["train_dataset"]["class"] = CrashOnce
"""


def test_a_resumed_run_leaves_each_step_once(tmp_path, monkeypatch):
    path = write_config(tmp_path / "c.py", tmp_path / "w", epochs=2, extra=CRASH)
    monkeypatch.setenv("CRASH_IN_EPOCH_1", "1")
    with pytest.raises(Exception, match="simulated crash in epoch 1"):
        train(path)
    monkeypatch.delenv("CRASH_IN_EPOCH_1")
    train(path)
    run = RunDir(str(tmp_path / "w"))
    assert len(glob.glob(os.path.join(run.tensorboard, "events.out.tfevents.*"))) == 2  # one file a launch
    steps = [event.step for event in events(run).Scalars("Loss/train_batch")]
    assert sorted(steps) == list(range(8))  # the steps of epoch 1 that the first launch began are purged
