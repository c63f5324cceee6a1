"""The training monitor beside a ``GradScaler`` (mixed precision in a trainer subclass that passes its scaler to
``BaseTrainer._optimizer_step``): the scaler's overflow steps, Inf gradients by design, are skipped by the scaler
and counted, never a NaN stop; the rows hold the true (unscaled) gradient norms; a NaN of the model itself is still
reported, and so is a gradient that stays non-finite once the scale is below 1."""

from __future__ import annotations

import logging
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from debuggers.training_monitor import NonFiniteTrainingError
from run_dir.names import MONITOR_FILE
from run_dir.training_log import read_training_log
from runners.hooks import Hooks, TrainingMonitorHook
from runners.trainers import BaseTrainer
from tests.debuggers.test_training_monitor import Toy, batch, criterion, monitored
from tests.runs import run_main, write_config

AMP_TRAINER = '''
from utils.ops import apply_tensor_op


class AmpTrainer(BaseTrainer):  # docs/training_monitor.md's, as a user writes it
    def _init_optimizer_(self):
        super()._init_optimizer_()
        self.scaler = torch.amp.GradScaler(self.device.type)

    def _train_step(self, dp):
        dp = apply_tensor_op(lambda t: t.to(self.device, non_blocking=True), dp)
        with torch.autocast(self.device.type, dtype=torch.bfloat16):
            loss = self.criterion(self._forward(self.model, dp["inputs"]), dp["labels"])
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self._optimizer_step(dp, loss, self.scaler)
        return float(loss.detach())


config["runner"] = AmpTrainer
config["training_monitor"] = {"every_n_steps": 1}
'''


@pytest.fixture
def logger():
    logger = logging.getLogger("test_training_monitor_amp")
    logger.setLevel(logging.INFO)
    return logger


def scaled_train(model, optimizer, monitor, scaler, batches, inspect=None):
    """The step of a trainer subclass in mixed precision, through BaseTrainer's own ``_optimizer_step``."""
    hook = TrainingMonitorHook(monitor.settings)
    hook.monitor = monitor
    trainer = SimpleNamespace(optimizer=optimizer, hooks=Hooks([hook]))
    model.train()
    for step, dp in enumerate(batches):
        loss = criterion(model(dp["inputs"]), dp["labels"])
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        if inspect is not None:
            inspect(step)
        BaseTrainer._optimizer_step(trainer, dp, loss, scaler)


def test_overflow_steps_of_a_grad_scaler_are_skipped_by_it_not_reported(tmp_path, logger, caplog):
    model, optimizer, monitor = monitored(tmp_path, logger, every_n_steps=1)
    with torch.no_grad():
        model.head.weight.mul_(100)  # gradients below it reach tens: at a scale near 2**127 they overflow float32
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**127)
    scales = []
    with caplog.at_level(logging.INFO):
        scaled_train(model, optimizer, monitor, scaler, [batch(8 * i) for i in range(8)],
                     inspect=lambda step: scales.append(scaler.get_scale()))
        monitor.end_epoch()
    monitor.close()
    skipped = sum(later < earlier for earlier, later in zip(scales, scales[1:]))
    assert skipped >= 1, scales  # the scaler did overflow, and halved its scale
    log = read_training_log(str(tmp_path / MONITOR_FILE))
    assert log.events == [] and log.histograms[0].nonfinite_steps == 0
    assert len(log.steps) == 8 - skipped and np.isfinite(log.grad_norm).all()
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())
    assert f"the gradient scaler skipped {skipped} overflowing step(s)" in caplog.text


def test_rows_hold_the_unscaled_gradient_norms(tmp_path, logger):
    model, optimizer, monitor = monitored(tmp_path, logger, every_n_steps=1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    by_hand = []

    def inspect(step):  # the scaled gradients, before _optimizer_step unscales them
        by_hand.append(math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in model.head.parameters()))
                       / scaler.get_scale())

    scaled_train(model, optimizer, monitor, scaler, [batch(0), batch(8)], inspect)
    monitor.close()
    log = read_training_log(str(tmp_path / MONITOR_FILE))
    np.testing.assert_allclose(log.grad_norm[:, log.layers.index("head")], by_hand, rtol=1e-5)


def test_a_nan_of_the_model_still_stops_the_run_under_a_scaler(tmp_path, logger):
    model, optimizer, monitor = monitored(tmp_path, logger)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    with pytest.raises(NonFiniteTrainingError, match=r"'gate' \(LogGate\), for idx \[9\]"):
        scaled_train(model, optimizer, monitor, scaler, [batch(0), batch(8, nan_idx=(9,))])


def test_gradients_non_finite_below_a_scale_of_one_are_reported(tmp_path, logger):
    """sqrt(0)'s NaN gradient looks like an overflow to the scaler, which halves its scale each step: at 2 and 1
    it is skipped as one, at 0.5 it is reported (nothing overflows unscaled)."""
    model, optimizer, monitor = monitored(tmp_path, logger, model=Toy(norm_output=True))
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0)
    with pytest.raises(NonFiniteTrainingError, match="non-finite training step 2 .*the loss is finite"):
        scaled_train(model, optimizer, monitor, scaler, [batch(0), batch(8), batch(16)])


@pytest.mark.slow
def test_the_documented_mixed_precision_trainer_runs_with_the_monitor(tmp_path):
    path = write_config(tmp_path / "amp.py", tmp_path / "amp", epochs=1, val_size=8, extra=AMP_TRAINER)
    done = run_main(path, timeout=240)
    assert done.returncode == 0, done.stderr
    log = read_training_log(str(tmp_path / "amp" / MONITOR_FILE))
    assert log.events == [] and len(log.steps) and np.isfinite(log.grad_norm).all()
    state = torch.load(tmp_path / "amp" / "epoch_0" / "checkpoint.pt", weights_only=True)["model_state_dict"]
    assert all(bool(torch.isfinite(value).all()) for value in state.values())
