"""``TrainingMonitor``: the PyTorch chapter's checks while training (gradients not updating, NaN loss,
exploding gradients), opt-in per config with ``'training_monitor'``.

Every step (a fused norm of every gradient and one fetch with the loss, which the trainer fetches each step
anyway): is the loss or a gradient NaN/Inf? At the first step where one is, the step's forward pass is rerun
with ``NaNInfDebugger`` hooked to name the first layer whose output went non-finite (``nonfinite_step``), and the
run stops, or warns and goes on, or warns and skips that step's update (``on_nonfinite``).

Every ``every_n_steps``-th step (rank 0 only): per layer, the gradient norm, the weight norm, the
update/weight ratio (‖Δw‖/‖w‖ of that optimizer step) and whether its gradient is zero, missing or frozen;
the learning rate of each parameter group; the loss of every step since the last row. At each epoch's end:
histograms of each layer's weights and gradients. All of it goes to ``work_dir/training_monitor.bin``
(``run_dir/monitor_file.py``, what the frames hold: ``run_dir/training_log.py``), which the
viewer's Training tab draws while the run goes on.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch

from debuggers.layer_histograms import layer_histograms
from debuggers.layer_norms import ModelLayers, squares_on, tensor_norms
from debuggers.nonfinite_step import NonFiniteStep, batch_idx_of, find_forward_origin, nonfinite_gradient_layers
from debuggers.tensorboard_log import TensorBoardLog, require_tensorboard
from run_dir.errors import MonitorFileError
from run_dir.monitor_file import Frame, MonitorFileWriter
from run_dir.names import MONITOR_FILE, TENSORBOARD_DIR
from run_dir.training_log import (
    GRAD_FROZEN,
    GRAD_MISSING,
    GRAD_NONFINITE,
    GRAD_OK,
    GRAD_STATES,
    GRAD_ZERO,
    KIND_EPOCH,
    KIND_LAYOUT,
    KIND_NONFINITE,
    KIND_STEP,
)
from utils import distributed
from utils.errors import LanternUserError, WorkDirError
from utils.settings import BOOLEAN, Settings, one_of, setting, whole_number

MONITOR_KEY = "training_monitor"
ON_NONFINITE = ("stop", "warn", "skip_step")
MAX_EVERY_N_STEPS = 100_000  # a row at least this often: more steps between rows is no monitoring
BINS_RANGE = (2, 1024)


class NonFiniteTrainingError(LanternUserError):
    """A training step's loss or gradient was NaN/Inf and ``on_nonfinite`` is ``'stop'``."""


@dataclass(frozen=True)
class MonitorSettings(Settings):
    """``config['training_monitor']``: ``True`` for these defaults, or a dict of some of them."""

    KEY = MONITOR_KEY
    DOC = ("checks while training: a NaN/Inf loss or gradient every step (stop, warn or skip it), per-layer gradient "
           "norms, update ratios and the learning rate every N steps, histograms per epoch, in "
           "`training_monitor.bin`: `True` or a dict of settings (off by default)")
    SEE = "[training_monitor.md](training_monitor.md)"
    IDENTIFIES_RUN = False  # a run the monitor stopped at a NaN resumes with it set to go on

    every_n_steps: int = setting(10, whole_number(1, MAX_EVERY_N_STEPS),
                                 "a row of norms every that many training steps")
    on_nonfinite: str = setting("stop", one_of(*ON_NONFINITE), "what a NaN/Inf loss or gradient does to the run: "
                                "stop it, warn and go on, or skip that step's update")
    histogram_bins: int = setting(32, whole_number(*BINS_RANGE), "bins of each layer's histograms per epoch")
    update_ratio: bool = setting(True, BOOLEAN, "record each layer's update/weight ratio, which copies the trainable "
                                 "parameters during each monitored step")
    tensorboard: bool = setting(False, BOOLEAN, "also write what it records, and the validation scores, as TensorBoard "
                                "event files in the run's `tensorboard/` (needs the tensorboard package)")


@dataclass
class _PendingRow:
    """A monitored step between its check (before the optimizer's step) and its row (after it)."""

    grad_squares: torch.Tensor  # (L,) on the device
    weight_squares: torch.Tensor  # (L,)
    present: list[bool]  # per parameter: has a gradient
    before: Optional[list[torch.Tensor]]  # trainable parameters before the step (for the update ratio)
    loss: float


class TrainingMonitor:
    """Checks every step and records every N-th; see the module's docstring. Built on every rank (each checks
    its own batch); rank 0 alone writes the file."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, settings: MonitorSettings,
                 work_dir: str, logger: logging.Logger, rank: int = 0, world_size: int = 1,
                 completed_epochs: int = 0, steps_per_epoch: Optional[int] = None) -> None:
        self.model, self.optimizer, self.settings = model, optimizer, settings
        self.layers = ModelLayers.of(model)
        self._trainable = [p for p in self.layers.params if p.requires_grad]
        self._log = logger
        self.world_size = world_size
        self.path = os.path.join(work_dir, MONITOR_FILE)
        self._file: Optional[MonitorFileWriter] = None
        self._tensorboard: Optional[TensorBoardLog] = None
        if settings.tensorboard:
            require_tensorboard()  # on every rank: none is left waiting for one that stopped
        start_step = completed_epochs * (steps_per_epoch or 0)
        if rank == 0:
            start_step = self._open_file(completed_epochs, start_step)
        self.step = distributed.broadcast_object(start_step)  # the optimizer steps done by this run so far
        if settings.tensorboard and rank == 0:
            self._tensorboard = TensorBoardLog(os.path.join(work_dir, TENSORBOARD_DIR), self.layers.names, self.step)
        self.epoch, self.batch_in_epoch = completed_epochs, 0
        self._losses: list[float] = []  # of the steps since the last frame
        self._pending: Optional[_PendingRow] = None
        self._reported: set[tuple[str, int]] = set()  # (layer, grad state) already in the log
        self._overflow_logged = False
        self.nonfinite_steps = 0  # in this epoch
        self.scaler_skipped_steps = 0  # in this epoch: a gradient scaler's overflow steps
        self.first_nonfinite: Optional[NonFiniteStep] = None
        self._buffers: list[torch.Tensor] = []  # before this step's forward pass, to undo a skipped step
        self._hooks = [model.register_forward_pre_hook(self._save_buffers)] if settings.on_nonfinite == "skip_step" \
            else []
        frozen = [name for name, trainable in zip(self.layers.names, self.layers.trainable) if not trainable]
        logger.info(f"Training monitor: {len(self.layers.names)} layers, a row every {settings.every_n_steps} steps "
                    f"in {self.path}; a NaN/Inf loss or gradient: {settings.on_nonfinite}"
                    + (f"; frozen (no gradient by design): {frozen[:20]}{' and more' if len(frozen) > 20 else ''}"
                       if frozen else ""))

    # ------------------------------------------------------------------ the file
    def _open_file(self, completed_epochs: int, start_step: int) -> int:
        """Open (or continue) the file, keeping only finished epochs' frames; return the step to count from."""
        try:
            self._file = MonitorFileWriter(self.path, keep=lambda frame: _epoch_of(frame) < completed_epochs)
        except (OSError, MonitorFileError) as exc:
            raise WorkDirError(f"cannot open the training monitor file {self.path} ({exc}); free disk space or "
                               "make the work dir writable, or remove config['training_monitor']") from exc
        kept = self._file.kept
        ends = [frame for frame in kept if frame.fields.get("kind") == KIND_EPOCH]
        layouts = [frame.fields for frame in kept if frame.fields.get("kind") == KIND_LAYOUT]
        done = ends[-1].fields.get("step") if ends else None
        layout = self._layout_fields(completed_epochs, done if type(done) is int else start_step)
        if not layouts or any(layouts[-1].get(k) != v for k, v in layout.items() if k not in ("epoch", "step")):
            self._append(layout)
        return layout["step"]

    def _layout_fields(self, epoch: int, step: int) -> dict[str, Any]:
        return {"kind": KIND_LAYOUT, "epoch": epoch, "step": step, "layers": self.layers.names,
                "layer_types": self.layers.types, "parameter_counts": self.layers.parameter_counts,
                "every_n_steps": self.settings.every_n_steps, "on_nonfinite": self.settings.on_nonfinite,
                "histogram_bins": self.settings.histogram_bins, "world_size": self.world_size}

    def _append(self, fields: dict[str, Any], arrays: Optional[dict[str, np.ndarray]] = None) -> None:
        """Write a frame (and its TensorBoard events); a failed write (a full disk) ends the file, not the run, and is
        logged once."""
        if self._file is None:
            return
        if self._tensorboard is not None:
            self._tensorboard.add(fields, arrays or {})
        try:
            self._file.append(fields, arrays)
        except (OSError, MonitorFileError) as exc:
            self._log.error(f"Training monitor: writing {self.path} failed ({exc}); the file ends here, training "
                            "and the NaN/Inf checks go on")
            self._close_file()

    def _close_file(self) -> None:
        self._on_file("closing", MonitorFileWriter.close)
        self._file = None

    def _sync(self) -> None:
        self._on_file("fsync of", MonitorFileWriter.sync)

    def _on_file(self, what: str, call: Callable[[MonitorFileWriter], None]) -> None:
        """``call(file)`` when the file is open; a failure is logged: the file only informs, the run goes on."""
        if self._file is not None:
            try:
                call(self._file)
            except OSError as exc:
                self._log.error(f"Training monitor: {what} {self.path} failed ({exc})")

    # ------------------------------------------------------------------ the loop
    def begin_epoch(self, epoch: int) -> None:
        self.epoch, self.batch_in_epoch, self.nonfinite_steps, self.scaler_skipped_steps = epoch, 0, 0, 0

    def check_step(self, datapoint: dict[str, Any], loss: torch.Tensor,
                   scaler: Optional[torch.amp.GradScaler] = None) -> bool:
        """Between ``loss.backward()`` and ``optimizer.step()``: check this step, start its row when it is
        monitored; return whether the optimizer should step (False to skip a non-finite step's update).
        Raises ``NonFiniteTrainingError`` when it must stop the run.

        With mixed precision, ``scaler`` is the ``GradScaler`` whose ``unscale_(optimizer)`` was called first (the
        gradients are then the true ones): a finite loss with NaN/Inf gradients is the scaler's overflow, which
        ``scaler.step`` skips and ``scaler.update`` answers by halving the scale, by design; it is counted, not
        reported, unless the scale is already below 1 (the gradients overflow unscaled)."""
        present = [p.grad is not None for p in self.layers.params]
        grads = [p.grad for p, has in zip(self.layers.params, present) if has]
        norms = tensor_norms(grads)
        device = loss.device
        total = _stacked(norms, device).sum().to(device) if norms else torch.zeros((), device=device)
        checked = torch.stack([loss.detach().reshape(()).float(), total.float()])
        if self.world_size > 1:  # the mean loss over ranks; a NaN/Inf on any rank makes it NaN/Inf everywhere
            checked = distributed.mean_across_ranks(checked)
        loss_value, grad_total = checked.tolist()  # the one fetch from the device of a step
        nonfinite = not math.isfinite(loss_value) or (not math.isfinite(grad_total) and self._gradient_nonfinite())
        if nonfinite and math.isfinite(loss_value) and _scaler_overflow(scaler):
            self.scaler_skipped_steps += 1
            if self._file is not None:
                self._losses.append(loss_value)  # the step has no row: its gradients are the scaler's overflow
            return True  # scaler.step skips it
        if self._file is not None:
            self._losses.append(loss_value)
            if nonfinite or self.step % self.settings.every_n_steps == 0:
                self._pending = self._start_row(norms, present, loss_value)
        if not nonfinite:
            return True
        return self._on_nonfinite(datapoint, loss, loss_value)

    def after_step(self) -> None:
        """After ``optimizer.step()`` (or where a skipped step would have been): write the pending row."""
        if self._pending is not None:
            self._write_row(self._pending)
            self._pending = None
        self.step += 1
        self.batch_in_epoch += 1

    def end_epoch(self) -> None:
        """Histograms of every layer's weights and last gradients, the last losses; fsync the file."""
        if self.nonfinite_steps:
            self._log.warning(f"Training monitor: {self.nonfinite_steps} step(s) of epoch {self.epoch} had a "
                              "NaN/Inf loss or gradient")
        if self.scaler_skipped_steps:
            self._log.info(f"Training monitor: the gradient scaler skipped {self.scaler_skipped_steps} overflowing "
                           f"step(s) of epoch {self.epoch} (by design: it then lowers its scale)")
        if self._file is None:
            return
        bins = self.settings.histogram_bins
        weights = layer_histograms(self.layers, lambda p: p, bins)
        grads = layer_histograms(self.layers, lambda p: p.grad, bins)
        self._append({"kind": KIND_EPOCH, "epoch": self.epoch, "step": self.step,
                      "first_step": self.step - len(self._losses), "nonfinite_steps": self.nonfinite_steps}, {
            "losses": np.asarray(self._losses, np.float32),
            "weight_counts": weights.counts, "weight_range": weights.ranges, "weight_nonfinite": weights.nonfinite,
            "grad_counts": grads.counts, "grad_range": grads.ranges, "grad_nonfinite": grads.nonfinite})
        self._losses = []
        self._sync()

    def add_validation(self, scores: dict[str, Any]) -> None:
        """An epoch's aggregated validation scores, for TensorBoard (the monitor file has them in the epoch's scores
        file already)."""
        if self._tensorboard is not None:
            self._tensorboard.add_scores(self.step, scores)

    def close(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        self._close_file()
        if self._tensorboard is not None:
            self._tensorboard.close()
            self._tensorboard = None

    def _save_buffers(self, module: torch.nn.Module, args: Any) -> None:
        """Before a training forward pass (not the NaN rerun, which runs without gradients)."""
        if module.training and torch.is_grad_enabled():
            self._buffers = [b.detach().clone() for b in module.buffers()]

    def _restore_buffers(self) -> None:
        """A skipped step leaves no trace: its forward pass's BatchNorm statistics (NaN) are undone too."""
        with torch.no_grad():
            for buffer, saved in zip(self.model.buffers(), self._buffers):
                buffer.copy_(saved)

    # ------------------------------------------------------------------ rows
    def _start_row(self, norms: list[torch.Tensor], present: list[bool], loss_value: float) -> _PendingRow:
        """What a row needs from before the optimizer's step, left on the device."""
        device = self.layers.params[0].device if self.layers.params else torch.device("cpu")
        indices = [i for i, has in enumerate(present) if has]
        count = len(self.layers.params)
        grad_squares = self.layers.per_layer(squares_on(norms, count, indices, device))
        weight_squares = self.layers.per_layer(squares_on(tensor_norms([p.detach() for p in self.layers.params]),
                                                          count, range(count), device))
        before = None
        if self.settings.update_ratio and self._trainable:
            with torch.no_grad():
                before = torch._foreach_mul([p.detach() for p in self._trainable], 1.0)
        return _PendingRow(grad_squares, weight_squares, present, before, loss_value)

    def _write_row(self, row: _PendingRow) -> None:
        update_squares = torch.zeros_like(row.weight_squares)
        if row.before is not None:
            with torch.no_grad():
                torch._foreach_sub_(row.before, [p.detach() for p in self._trainable])
            trainable = [i for i, p in enumerate(self.layers.params) if p.requires_grad]
            update_squares = self.layers.per_layer(squares_on(tensor_norms(row.before), len(self.layers.params),
                                                              trainable, row.weight_squares.device))
        fetched = torch.stack([row.grad_squares, row.weight_squares, update_squares]).cpu().numpy()
        grad_norm, weight_norm, update_norm = np.sqrt(fetched)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where((weight_norm > 0) & self.settings.update_ratio, update_norm / weight_norm, np.nan)
        states = self._grad_states(grad_norm, row.present)
        lr = np.array([float(group["lr"]) for group in self.optimizer.param_groups], np.float64)
        self._append({"kind": KIND_STEP, "epoch": self.epoch, "step": self.step,
                      "first_step": self.step - len(self._losses) + 1, "loss": row.loss},
                     {"losses": np.asarray(self._losses, np.float32), "lr": lr,
                      "grad_norm": grad_norm.astype(np.float32), "weight_norm": weight_norm.astype(np.float32),
                      "update_ratio": ratio.astype(np.float32), "grad_state": states})
        self._losses = []
        self._report_states(states)

    def _grad_states(self, grad_norm: np.ndarray, present: list[bool]) -> np.ndarray:
        """Per layer: frozen, missing (no parameter got a gradient), non-finite, zero or ok. A zero norm is
        checked exactly (float32 norms of values below 1e-19 underflow to 0)."""
        has_grad = np.zeros(len(self.layers.names), bool)
        for param, layer in zip(self.layers.pair_param.tolist(), self.layers.pair_layer.tolist()):
            has_grad[layer] |= present[param]
        states = np.full(len(self.layers.names), GRAD_OK, np.uint8)
        states[(grad_norm == 0) & has_grad] = GRAD_ZERO
        states[~np.isfinite(grad_norm)] = GRAD_NONFINITE
        states[~has_grad] = GRAD_MISSING
        states[~np.asarray(self.layers.trainable, bool)] = GRAD_FROZEN
        for layer in np.flatnonzero(states == GRAD_ZERO):
            if self._any_nonzero_grad(int(layer)):
                states[layer] = GRAD_OK
        return states

    def _any_nonzero_grad(self, layer: int) -> bool:
        params = [self.layers.params[p] for p, owner in zip(self.layers.pair_param.tolist(),
                                                            self.layers.pair_layer.tolist()) if owner == layer]
        return any(bool(p.grad.ne(0).any()) for p in params if p.grad is not None)

    def _report_states(self, states: np.ndarray) -> None:
        """Log layers whose gradient is missing or zero, each the first time it is seen so."""
        for state, why in ((GRAD_MISSING, "no gradient reaches them (unused in the forward pass, or detached)"),
                           (GRAD_ZERO, "their gradient is exactly zero (dead ReLUs, saturation, a zero "
                                       "learning signal)")):
            new = [self.layers.names[i] for i in np.flatnonzero(states == state)
                   if (self.layers.names[i], state) not in self._reported]
            if new:
                self._reported.update((name, state) for name in new)
                self._log.warning(f"Training monitor, step {self.step}: gradients not updating in {len(new)} "
                                  f"layer(s) ({GRAD_STATES[state]}): {new[:20]}"
                                  f"{' and more' if len(new) > 20 else ''}: {why}")

    # ------------------------------------------------------------------ non-finite steps
    def _gradient_nonfinite(self) -> bool:
        """Whether a gradient holds NaN/Inf, once the total norm was not finite: a norm past float32 (values
        beyond 1e19) is an exploding gradient, logged, not a non-finite one."""
        if nonfinite_gradient_layers(self.layers):
            return True
        if not self._overflow_logged:
            self._overflow_logged = True
            self._log.warning(f"Training monitor, step {self.step}: the gradient norm overflows float32 (values "
                              "beyond 1e19): exploding gradients. Clip them (torch.nn.utils.clip_grad_norm_) or "
                              "lower the learning rate")
        return False

    def _on_nonfinite(self, datapoint: dict[str, Any], loss: torch.Tensor, loss_value: float) -> bool:
        """Record the first non-finite step (and count later ones); stop, or say whether to apply the step."""
        self.nonfinite_steps += 1
        action = self.settings.on_nonfinite
        if action == "skip_step":
            self._restore_buffers()
        if self.first_nonfinite is not None:
            return action == "warn"
        local = NonFiniteStep(self.epoch, self.step, self.batch_in_epoch, float(loss.detach()), batch_idx_of(datapoint),
                              nonfinite_gradient_layers(self.layers))
        find_forward_origin(local, self.model, datapoint)
        found = _merge_ranks(distributed.gather_objects(local), loss_value)
        self.first_nonfinite = found
        message = found.describe()
        ending = {"stop": "The run stopped", "warn": "Training goes on with it",
                  "skip_step": "This step's update was skipped; training goes on"}[action]
        self._append({"kind": KIND_NONFINITE, "epoch": found.epoch, "step": found.step, "loss": found.loss,
                      "batch_idx": found.batch_idx, "first_layer": found.first_layer,
                      "first_layer_type": found.first_layer_type, "first_layer_idx": found.first_layer_idx,
                      "gradient_layers": found.gradient_layers, "input_nonfinite_idx": found.input_nonfinite_idx,
                      "action": action, "message": message})
        if action == "stop":
            if self._pending is not None:  # the step's row, with its non-finite layers, is the last one
                self._write_row(self._pending)
            self._sync()
            raise NonFiniteTrainingError(f"{message}. {ending} (config['{MONITOR_KEY}']['on_nonfinite'] = 'stop'; "
                                         "'warn' or 'skip_step' go on instead). The run's Training tab in the viewer "
                                         "shows the steps before it")
        self._sync()
        self._log.warning(f"Training monitor: {message}. {ending} (on_nonfinite = {action!r}); later non-finite "
                          "steps are counted per epoch")
        return action == "warn"


def _scaler_overflow(scaler: Optional[torch.amp.GradScaler]) -> bool:
    """Whether non-finite gradients are what an enabled gradient scaler makes on purpose (an overflow at a scale
    of 1 or more, which it skips and halves), not a NaN/Inf of the training itself."""
    return scaler is not None and scaler.is_enabled() and scaler.get_scale() >= 1.0


def _stacked(norms: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    """The norms as one tensor: at once when on one device (the common case), else moved to ``device``."""
    try:
        return torch.stack(norms)
    except RuntimeError:  # a model spread over several devices
        return torch.stack([n.to(device) for n in norms])


def _merge_ranks(found: list[NonFiniteStep], mean_loss: float) -> NonFiniteStep:
    """One report from every rank's: the first rank whose forward pass went non-finite (else whose loss did,
    else rank 0), with the loss averaged over ranks, as training saw it."""
    chosen = next((f for f in found if f.first_layer is not None), None) \
        or next((f for f in found if not math.isfinite(f.loss)), found[0])
    if len(found) > 1:
        chosen.batch_idx = [idx for f in found for idx in f.batch_idx]
        chosen.input_nonfinite_idx = [idx for f in found for idx in f.input_nonfinite_idx]
    chosen.loss = mean_loss
    return chosen


def _epoch_of(frame: Frame) -> float:
    epoch = frame.fields.get("epoch")
    return epoch if type(epoch) is int else math.inf
