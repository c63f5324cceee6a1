"""The trainer's step as config keys, in real short runs: gradient accumulation (k batches make the step one batch k
times larger makes), mixed precision (bfloat16 on the CPU; float16 with a GradScaler whose overflow steps are no NaN
stop for the training monitor), and the overfit-one-batch check (runners/training_step.py, runners/overfit.py)."""

from __future__ import annotations

import pytest
import torch

from run_dir.training_log import read_training_log
from runners.checkpoints import load_checkpoint_file
from runners.config_file import load_config
from runners.trainers import BaseTrainer
from tests.runs import one_thread, write_config
from utils.errors import ConfigError

MLP = """
from torch import nn


def mlp():  # a plain model without BatchNorm, which would normalise each batch on its own
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 32), nn.ReLU(), nn.Linear(32, 6))


config["model"] = {"class": mlp, "args": {}}
config["optimizer"] = {"class": torch.optim.SGD, "args": {"lr": 0.1}}
config.pop("scheduler")
"""


def run(tmp_path, name, extra="", epochs=1, train_size=64):
    path = write_config(tmp_path / f"{name}.py", tmp_path / name, epochs=epochs, train_size=train_size, extra=extra)
    config = load_config(path)
    with one_thread():
        BaseTrainer(config).run()
    return tmp_path / name


def weights(work_dir, epoch=0):
    return load_checkpoint_file(str(work_dir / f"epoch_{epoch}" / "checkpoint.pt"))["model_state_dict"]


def batch_size(size):
    return f'config["train_dataloader"]["args"]["batch_size"] = {size}\n'


@pytest.mark.parametrize(("train_size", "small", "k", "large"), [(64, 8, 2, 16), (56, 8, 3, 24)],
                         ids=["whole_windows", "a_shorter_last_window"])
def test_k_accumulated_batches_step_as_one_batch_k_times_larger(tmp_path, train_size, small, k, large):
    """The same shuffled order in batches of 8, stepping every k, and in batches of 8k: the same weights (56 datapoints
    in windows of 3 batches of 8: the last window is one batch, divided by 1, as the last batch of 24 is 8 images)."""
    monitor = 'config["training_monitor"] = {"every_n_steps": 1}\n'
    accumulated = run(tmp_path, "accumulated", MLP + batch_size(small) + monitor
                      + f'config["gradient_accumulation_steps"] = {k}\n', train_size=train_size)
    large_batches = run(tmp_path, "large", MLP + batch_size(large), train_size=train_size)
    for name, value in weights(large_batches).items():
        torch.testing.assert_close(weights(accumulated)[name], value, rtol=1e-5, atol=1e-6)
    steps = -(-train_size // large)
    assert len(read_training_log(str(accumulated / "training_monitor.bin")).steps) == steps  # a row per step
    assert len(torch.load(accumulated / "epoch_0" / "training_losses.pt")) == -(-train_size // small)  # per batch


def test_bfloat16_on_the_cpu_trains_and_validates_in_full_precision(tmp_path):
    work_dir = run(tmp_path, "bf16", 'config["mixed_precision"] = True\n', epochs=2)
    log = (work_dir / "train.log").read_text()
    assert "Training step: mixed precision: autocast to bfloat16, an optimizer step every 1 batch(es)" in log
    losses = [torch.load(work_dir / f"epoch_{epoch}" / "training_losses.pt") for epoch in range(2)]
    assert losses[1].mean() < losses[0].mean()
    checkpoint = load_checkpoint_file(str(work_dir / "epoch_1" / "checkpoint.pt"))
    assert checkpoint["scaler_state_dict"] is None  # bfloat16 needs no scaler
    assert all(value.dtype == torch.float32 for value in checkpoint["model_state_dict"].values()
               if value.is_floating_point())


LOUD = """
class Loud(SmallCNN):
    '''Its head's weights 300 times too large: at the GradScaler's first scale (65536) the float16 gradients
    overflow, by design of the scaler, which skips those steps and lowers its scale.'''

    def __init__(self, **args):
        super().__init__(**args)
        with torch.no_grad():
            self.head.fc.weight.mul_(300)


config["model"]["class"] = Loud
config["mixed_precision"] = "float16"
config["training_monitor"] = {"every_n_steps": 1, "on_nonfinite": "stop"}
"""


def test_float16_steps_the_grad_scaler_skips_are_counted_not_a_nan_stop(tmp_path):
    work_dir = run(tmp_path, "fp16", LOUD, epochs=2)
    log = (work_dir / "train.log").read_text()
    assert "autocast to float16 with a GradScaler" in log
    assert "Training monitor: the gradient scaler skipped 4 overflowing step(s) of epoch 0" in log
    assert "non-finite" not in log and "Training done" in log
    scaler = load_checkpoint_file(str(work_dir / "epoch_1" / "checkpoint.pt"))["scaler_state_dict"]
    assert scaler["scale"] < 65536.0  # lowered after each overflow: the state a resumed run goes on from
    training = read_training_log(str(work_dir / "training_monitor.bin"))
    assert len(training.steps) < 8 and not training.events  # no row for a skipped step, and no NaN event


def test_a_bad_precision_or_accumulation_is_refused_naming_the_choices():
    config = {"runner": BaseTrainer, "work_dir": "unused", "mixed_precision": "fp8"}
    with pytest.raises(ConfigError, match=r"config\['mixed_precision'\] must be True, False, 'float16' or "
                                          r"'bfloat16'"):
        BaseTrainer({**config, "model": 0, "metric": 0, "criterion": 0, "optimizer": 0, "train_dataset": 0,
                     "val_dataset": 0, "epochs": 1})
    with pytest.raises(ConfigError, match=r"config\['gradient_accumulation_steps'\] must be a whole number from 1"):
        BaseTrainer({**config, "mixed_precision": False, "gradient_accumulation_steps": 0, "model": 0, "metric": 0,
                     "criterion": 0, "optimizer": 0, "train_dataset": 0, "val_dataset": 0, "epochs": 1})


OVERFIT = """
config["overfit_one_batch"] = {"steps": 80, "target_loss": 0.01}
config["optimizer"] = {"class": torch.optim.Adam, "args": {"lr": 0.01}}
config.pop("scheduler")
"""


def test_overfitting_one_batch_says_the_model_memorises_it(tmp_path):
    work_dir = run(tmp_path, "overfit", OVERFIT)
    log = (work_dir / "train.log").read_text()
    [line] = [line for line in log.splitlines() if "Overfit check: one batch" in line]
    assert " INFO " in line and "is memorised: its loss went from" in line and "in 80 steps, below 0.01" in line
    losses = torch.load(work_dir / "epoch_0" / "training_losses.pt")
    assert len(losses) == 80 and losses[-1] < 0.01 < losses[0]


def test_a_model_that_cannot_learn_is_said_not_to_memorise_the_batch(tmp_path):
    frozen = OVERFIT + 'config["optimizer"] = {"class": torch.optim.Adam, "args": {"lr": 0.0}}\n'
    log = (run(tmp_path, "frozen", frozen) / "train.log").read_text()
    [line] = [line for line in log.splitlines() if "Overfit check: one batch" in line]
    assert " WARNING " in line and "is not memorised" in line and "the learning rate" in line
