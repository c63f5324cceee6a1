"""TrainingMonitor on a real model and optimizer, writing its real file: rows against an independent computation
(per-layer norms by hand, the update measured from copies of the weights, histograms by NumPy), the layers
whose gradients do not update, and the first non-finite step with the layer it came from."""

from __future__ import annotations

import logging
import math
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from debuggers.training_monitor import (
    MAX_EVERY_N_STEPS,
    MonitorSettings,
    NonFiniteTrainingError,
    TrainingMonitor,
)
from run_dir.names import MONITOR_FILE
from run_dir.training_log import (
    GRAD_FROZEN,
    GRAD_MISSING,
    GRAD_NONFINITE,
    GRAD_OK,
    GRAD_ZERO,
    read_training_log,
)
from utils.errors import ConfigError

BATCH = 8


class LogGate(nn.Module):
    """log(2 + x): NaN for a datapoint whose first input is below -2 (the planted NaN)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.log(2 + x[:, :1]), x[:, 1:]], dim=1)


class Toy(nn.Module):
    """Every gradient state: ``frozen`` (requires_grad off), ``unused`` (never called), ``dead`` (a ReLU that
    is always off behind it: exactly zero gradient), the rest ok; a BatchNorm whose statistics must not see the
    NaN rerun."""

    def __init__(self, norm_output: bool = False) -> None:
        super().__init__()
        self.gate = LogGate()
        self.encoder = nn.Linear(4, 8)
        self.norm = nn.BatchNorm1d(8)
        self.frozen = nn.Linear(4, 8).requires_grad_(False)
        self.dead = nn.Linear(8, 8)
        nn.init.constant_(self.dead.bias, -1e3)
        self.unused = nn.Linear(8, 8)
        self.head = nn.Linear(16, 3)
        self.norm_output = norm_output

    def forward(self, inputs: dict) -> dict:
        x = self.gate(inputs["x"])
        hidden = torch.relu(self.norm(self.encoder(x))) + self.frozen(x)
        features = torch.cat([hidden, torch.relu(self.dead(hidden))], dim=1)
        logits = self.head(features)
        if self.norm_output:  # sqrt of 0: a finite loss, a NaN gradient
            logits = logits + features[:, :1].mul(0).pow(2).sum(dim=1, keepdim=True).sqrt()
        return {"logits": logits}


def batch(start: int, nan_idx: tuple = (), input_nan_idx: tuple = ()) -> dict:
    generator = torch.Generator().manual_seed(start)
    x = torch.rand(BATCH, 4, generator=generator) * 2 - 1  # above -2: no NaN but the planted ones
    idx = torch.arange(start, start + BATCH)
    for i in nan_idx:
        x[i - start, 0] = -5.0
    for i in input_nan_idx:
        x[i - start, 2] = math.nan
    return {"inputs": {"x": x}, "labels": {"class": torch.arange(BATCH) % 3}, "meta_info": {"idx": idx}}


def criterion(outputs: dict, labels: dict) -> torch.Tensor:
    return F.cross_entropy(outputs["logits"], labels["class"])


@pytest.fixture
def logger():
    logger = logging.getLogger("test_training_monitor")
    logger.setLevel(logging.INFO)
    return logger


def monitored(tmp_path, logger, model=None, **settings):
    torch.manual_seed(0)
    model = model or Toy()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    monitor = TrainingMonitor(model, optimizer, MonitorSettings(**settings), str(tmp_path), logger)
    return model, optimizer, monitor


def train(model, optimizer, monitor, batches, inspect=None):
    """The trainer's step; ``inspect(step)`` sees the gradients before the optimizer's step."""
    model.train()
    applied = []
    for step, dp in enumerate(batches):
        loss = criterion(model(dp["inputs"]), dp["labels"])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if inspect is not None:
            inspect(step, loss)
        apply = monitor.check_step(dp, loss)
        if apply:
            optimizer.step()
        applied.append(apply)
        monitor.after_step()
    return applied


def layer_params(model):
    return {name: list(module.parameters(recurse=False)) for name, module in model.named_modules()
            if list(module.parameters(recurse=False))}


def test_rows_match_norms_updates_and_states_computed_by_hand(tmp_path, logger, caplog):
    model, optimizer, monitor = monitored(tmp_path, logger, every_n_steps=2)
    layers = layer_params(model)
    grads, before, after, losses = {}, {}, {}, []

    def norms(tensors: dict) -> list[float]:
        return [math.sqrt(sum(float(t.double().pow(2).sum()) for t in tensors[name])) for name in layers]

    def weights() -> dict:
        return {name: [p.detach().clone() for p in params] for name, params in layers.items()}

    def inspect(step, loss):  # before the optimizer's step
        losses.append(float(loss.detach()))
        if step - 1 in before:
            after[step - 1] = weights()
        if step % 2 == 0:
            grads[step] = norms({name: [p.grad for p in params if p.grad is not None]
                                 for name, params in layers.items()})
            before[step] = weights()

    with caplog.at_level(logging.WARNING):
        train(model, optimizer, monitor, [batch(8 * i) for i in range(5)], inspect)
    after[4] = weights()
    monitor.end_epoch()
    monitor.close()
    log = read_training_log(str(tmp_path / MONITOR_FILE))
    assert log.layers == list(layers) and log.steps.tolist() == [0, 2, 4]
    np.testing.assert_allclose(log.losses, losses, rtol=1e-6)
    for row, step in enumerate(log.steps.tolist()):
        np.testing.assert_allclose(log.grad_norm[row], grads[step], rtol=1e-5)
        np.testing.assert_allclose(log.weight_norm[row], norms(before[step]), rtol=1e-5)
        update = norms({name: [a - b for a, b in zip(after[step][name], before[step][name])] for name in layers})
        np.testing.assert_allclose(log.update_ratio[row], np.divide(update, norms(before[step])), rtol=1e-4)
    states = dict(zip(log.layers, log.grad_state[0].tolist()))
    assert states == {"encoder": GRAD_OK, "norm": GRAD_OK, "frozen": GRAD_FROZEN, "dead": GRAD_ZERO,
                      "unused": GRAD_MISSING, "head": GRAD_OK}
    assert log.update_ratio[0][log.layers.index("frozen")] == 0
    assert log.lr.tolist() == [[0.1]] * 3
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "['unused']" in warned and "['dead']" in warned and warned.count("['dead']") == 1  # once, not per row


def test_epoch_histograms_are_those_numpy_makes(tmp_path, logger):
    model, optimizer, monitor = monitored(tmp_path, logger, histogram_bins=16)
    train(model, optimizer, monitor, [batch(0), batch(8)])
    monitor.end_epoch()
    monitor.close()
    histograms = read_training_log(str(tmp_path / MONITOR_FILE)).histograms[0]
    for i, (name, params) in enumerate(layer_params(model).items()):
        values = torch.cat([p.detach().reshape(-1) for p in params]).double().numpy()
        counts, edges = np.histogram(values, 16, range=(values.min(), values.max()))
        np.testing.assert_allclose(histograms.weight_range[i], (edges[0], edges[-1]), rtol=1e-6)
        assert np.abs(histograms.weight_counts[i] - counts).sum() <= 2, name  # float32 binning at an edge
        assert histograms.weight_counts[i].sum() == values.size
        grads = [p.grad for p in params if p.grad is not None]
        assert histograms.grad_counts[i].sum() == sum(g.numel() for g in grads), name


def test_a_nan_stops_at_its_step_naming_the_layer_and_the_idx_and_leaves_training_untouched(tmp_path, logger):
    model, optimizer, monitor = monitored(tmp_path, logger, every_n_steps=100)
    batches = [batch(0), batch(8), batch(16, nan_idx=(21,))]
    seen = {}

    def inspect(step, loss):
        if step == 2:
            seen["buffers"] = [b.clone() for b in model.buffers()]
            seen["rng"] = torch.get_rng_state()

    with pytest.raises(NonFiniteTrainingError) as stopped:
        train(model, optimizer, monitor, batches, inspect)
    message = str(stopped.value)
    assert "step 2 (epoch 0, batch 2 of the epoch" in message
    assert "'gate' (LogGate), for idx [21]" in message and "idx [16, 17, 18, 19, 20, 21, 22, 23]" in message
    assert "the loss is nan" in message and "on_nonfinite" in message
    for buffer, before in zip(model.buffers(), seen["buffers"]):  # the rerun left BatchNorm's buffers as they were
        torch.testing.assert_close(buffer, before, rtol=0, atol=0, equal_nan=True)  # num_batches_tracked too
    assert torch.equal(torch.get_rng_state(), seen["rng"])
    monitor.close()
    log = read_training_log(str(tmp_path / MONITOR_FILE))
    event = log.events[0]
    assert (event.step, event.first_layer, event.first_layer_idx, event.action) == (2, "gate", [21], "stop")
    assert log.steps.tolist() == [0, 2]  # the stopped step's row is the last one, its gradients non-finite
    assert GRAD_NONFINITE in log.grad_state[1].tolist() and log.first_nonfinite_step == 2


@pytest.mark.parametrize("action, applied, nonfinite", [
    ("warn", [True, True, True, True], 3),  # step 1's update made every weight NaN: every later step is NaN too
    ("skip_step", [True, False, True, False], 2)])
def test_warn_and_skip_go_on_reporting_the_first_non_finite_step_once(tmp_path, logger, caplog, action, applied,
                                                                     nonfinite):
    model, optimizer, monitor = monitored(tmp_path, logger, on_nonfinite=action)
    batches = [batch(0), batch(8, nan_idx=(9,)), batch(16), batch(24, nan_idx=(30,))]
    with caplog.at_level(logging.WARNING):
        assert train(model, optimizer, monitor, batches) == applied
        monitor.end_epoch()
    monitor.close()
    log = read_training_log(str(tmp_path / MONITOR_FILE))
    assert [(e.step, e.first_layer, e.action) for e in log.events] == [(1, "gate", action)]
    assert log.histograms[0].nonfinite_steps == nonfinite
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "idx [9]" in warned and f"{nonfinite} step(s) of epoch 0 had a NaN/Inf" in warned
    if action == "skip_step":  # neither the update nor the BatchNorm statistics of a skipped step are kept
        assert all(bool(torch.isfinite(t).all()) for t in [*model.parameters(), *model.buffers()])


def test_a_nan_made_by_the_backward_pass_names_the_layers_whose_gradient_holds_it(tmp_path, logger):
    model, optimizer, monitor = monitored(tmp_path, logger, model=Toy(norm_output=True))
    with pytest.raises(NonFiniteTrainingError) as stopped:
        train(model, optimizer, monitor, [batch(0)])
    message = str(stopped.value)
    assert "the loss is finite" in message and "every layer's output is finite: the backward pass" in message
    assert "layers whose gradient holds NaN/Inf: ['encoder', 'norm']" in message  # what sqrt(0)'s gradient reaches
    monitor.close()
    event = read_training_log(str(tmp_path / MONITOR_FILE)).events[0]
    assert event.first_layer is None and event.gradient_layers == ["encoder", "norm"]


def test_nan_in_the_inputs_names_their_idx(tmp_path, logger):
    model, optimizer, monitor = monitored(tmp_path, logger)
    with pytest.raises(NonFiniteTrainingError, match=r"the inputs of idx \[4\] already hold NaN/Inf"):
        train(model, optimizer, monitor, [batch(0, input_nan_idx=(4,))])


def test_a_gradient_norm_past_float32_is_an_exploding_gradient_not_a_nan(tmp_path, logger, caplog):
    model, optimizer, monitor = monitored(tmp_path, logger)
    with torch.no_grad():
        model.head.weight.mul_(1e21)  # finite gradients of the layers below, beyond 1e19: their norm overflows
    with caplog.at_level(logging.WARNING):
        assert train(model, optimizer, monitor, [batch(0)]) == [True]
    assert "exploding gradients" in caplog.text


@pytest.mark.parametrize("entry, message", [
    ({"every_n_steps": 10**9}, f"from 1 to {MAX_EVERY_N_STEPS:,}"),
    ({"every_n_steps": 0}, f"from 1 to {MAX_EVERY_N_STEPS:,}"),
    ({"every_n_steps": True}, "must be a whole number"),
    ({"on_nonfinite": "continue"}, "'stop', 'warn', 'skip_step'"),
    ({"histogram_bins": 10**6}, "from 2 to 1,024"),
    ({"update_ratio": "yes"}, "True or False"),
    ({"every_n_step": 5}, "did you mean 'every_n_steps'"),
    ("on", "must be True, False or a dict"),
])
def test_absurd_settings_are_refused_naming_the_limit(entry, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        MonitorSettings.from_entry(entry)


def test_monitoring_is_off_unless_asked_for():
    assert MonitorSettings.from_entry(None) is None and MonitorSettings.from_entry(False) is None
    assert MonitorSettings.from_entry(True) == MonitorSettings()


def test_a_file_that_cannot_be_written_ends_the_file_not_the_checks(tmp_path, logger, caplog):
    model, optimizer, monitor = monitored(tmp_path, logger, every_n_steps=1)
    train(model, optimizer, monitor, [batch(0)])
    os.close(monitor._file._fd)  # the descriptor is gone: the next write fails as a full or lost disk would
    with caplog.at_level(logging.ERROR):
        train(model, optimizer, monitor, [batch(8)])
    assert "the file ends here, training and the NaN/Inf checks go on" in caplog.text
    with pytest.raises(NonFiniteTrainingError, match="idx \\[17\\]"):
        train(model, optimizer, monitor, [batch(16, nan_idx=(17,))])
    assert read_training_log(str(tmp_path / MONITOR_FILE)).steps.tolist() == [0]  # what was written stays readable


def test_without_the_update_ratio_it_is_not_recorded_and_the_rest_is(tmp_path, logger):
    model, optimizer, monitor = monitored(tmp_path, logger, update_ratio=False)
    train(model, optimizer, monitor, [batch(0)])
    monitor.close()
    log = read_training_log(str(tmp_path / MONITOR_FILE))
    assert np.isnan(log.update_ratio).all() and np.isfinite(log.grad_norm[0][log.grad_state[0] == GRAD_OK]).all()
