"""The training monitor in real runs (``python main.py`` in a subprocess): a NaN made by planted training images
stops the run naming the step, the layer and the idx, or is skipped as configured; an absurd setting is refused
before anything trains. Which steps are hit is computed independently, from the trainer's seeded order."""

from __future__ import annotations

import math
import os

import pytest
import torch
from torch.utils.data import RandomSampler

from run_dir.names import MONITOR_FILE
from run_dir.training_log import read_training_log
from runners.config_file import load_config
from tests.runs import run_main, write_config
from utils.builders import build_from_config

BATCH = 16  # tests.runs.TINY_CONFIG's training batch size

NAN_ON_SATURATED = '''
from collections import OrderedDict

from torch import nn

from models.small_cnn import OverflowGate


class NaNOnSaturated(SmallCNN):
    """SmallCNN whose first convolution's output overflows (NaN) for an image with a saturated pixel block."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        stage = self.backbone.layer1
        self.backbone.layer1 = nn.Sequential(OrderedDict(conv=stage.conv, overflow=OverflowGate(100.0), bn=stage.bn,
                                                         relu=stage.relu, pool=stage.pool))


config["train_dataset"]["args"]["saturated_fraction"] = 0.03
config["model"]["class"] = NaNOnSaturated
'''


def saturated_steps(config: dict, epoch: int) -> dict[int, list[int]]:
    """{step of the epoch: saturated idx in its batch}, in the order the trainer draws the epoch's batches."""
    dataset = build_from_config(config["train_dataset"], "train_dataset")
    order = list(RandomSampler(range(len(dataset)), generator=torch.Generator().manual_seed(config["seed"] * 1000
                                                                                            + epoch)))
    batches = [order[i:i + BATCH] for i in range(0, len(order), BATCH)]
    return {step: hit for step, batch in enumerate(batches)
            if (hit := sorted(i for i in batch if dataset.planted(i).saturated))}


def test_a_nan_while_training_stops_the_run_naming_the_step_the_layer_and_the_idx(tmp_path):
    path = write_config(tmp_path / "nan.py", tmp_path / "nan", epochs=1,
                        extra=NAN_ON_SATURATED + 'config["training_monitor"] = {"every_n_steps": 3}')
    config = load_config(path)
    step, idx = next(iter(saturated_steps(config, 0).items()))
    assert step > 0  # the steps before it trained, and have their rows

    stopped = run_main(path, timeout=180)
    assert stopped.returncode == 2, stopped.stderr
    assert f"non-finite training step {step} (epoch 0, batch {step} of the epoch" in stopped.stderr
    assert f"'backbone.layer1.overflow' (OverflowGate), for idx {idx}" in stopped.stderr
    assert "The run stopped" in stopped.stderr
    log = read_training_log(os.path.join(config["work_dir"], MONITOR_FILE))
    assert [(e.step, e.first_layer, e.first_layer_idx) for e in log.events] == [(step, "backbone.layer1.overflow", idx)]
    assert log.steps.tolist() == [s for s in range(step) if s % 3 == 0] + [step]  # the stopped step's row last
    assert log.loss_steps.tolist() == list(range(step + 1)) and math.isnan(log.losses[-1])
    assert all(math.isfinite(loss) for loss in log.losses[:-1])
    assert f"non-finite training step {step}" in open(os.path.join(config["work_dir"], "train.log")).read()


@pytest.mark.slow
def test_skip_step_trains_on_without_the_non_finite_steps(tmp_path):
    path = write_config(tmp_path / "skip.py", tmp_path / "skip", epochs=2, val_size=8,
                        extra=NAN_ON_SATURATED + 'config["training_monitor"] = {"on_nonfinite": "skip_step"}')
    config = load_config(path)
    done = run_main(path, timeout=240)
    assert done.returncode == 0, done.stderr
    log = read_training_log(os.path.join(config["work_dir"], MONITOR_FILE))
    hit = [saturated_steps(config, epoch) for epoch in range(2)]
    assert [h.nonfinite_steps for h in log.histograms] == [len(h) for h in hit]
    first = min(hit[0])
    assert [(e.step, e.action, e.first_layer_idx) for e in log.events] == [(first, "skip_step", hit[0][first])]
    state = torch.load(os.path.join(config["work_dir"], "epoch_1", "checkpoint.pt"), weights_only=True)
    assert all(bool(torch.isfinite(value).all()) for value in state["model_state_dict"].values())
    assert "This step's update was skipped" in open(os.path.join(config["work_dir"], "train.log")).read()


def test_an_absurd_monitoring_interval_is_refused_at_start_up_naming_the_limit(tmp_path):
    path = write_config(tmp_path / "absurd.py", tmp_path / "absurd",
                        extra='config["training_monitor"] = {"every_n_steps": 10**9}')
    refused = run_main(path, timeout=120)
    assert refused.returncode == 2
    assert "config['training_monitor']['every_n_steps'] must be a whole number from 1 to 100,000" in refused.stderr
    assert not os.path.exists(tmp_path / "absurd" / "epoch_0")
