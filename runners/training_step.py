"""How a trainer's step runs: mixed precision and gradient accumulation, two config keys.

``mixed_precision``: the forward pass and the loss run under ``torch.autocast``; ``True`` is float16 with a
``GradScaler`` on CUDA (float16 gradients underflow without one) and bfloat16 on the CPU (no scaler: bfloat16 has
float32's range); ``'float16'`` or ``'bfloat16'`` choose the type on any device. Validation runs in full precision,
so debuggers see float32 activations.

``gradient_accumulation_steps`` = k: each optimizer step follows k batches, each batch's loss divided by k before its
backward pass (an epoch's last, shorter window by its own size; by k where the loader has no length, an
IterableDataset's), so the step sees the gradient of the mean loss over the k batches, as one batch k times larger
would give (BatchNorm aside: it still normalises each batch). Under torchrun the gradients are all-reduced on the
window's last batch only.
"""

from __future__ import annotations

import contextlib
import math
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from utils.settings import Rule, Settings, setting, whole_number

PRECISIONS = {"float16": torch.float16, "bfloat16": torch.bfloat16}
MAX_ACCUMULATION = 10_000


@dataclass(frozen=True)
class TrainingStepSettings(Settings):
    """The top-level keys of a trainer's step."""

    mixed_precision: Any = setting(False, Rule("True, False, 'float16' or 'bfloat16'", lambda value: isinstance(
        value, bool) or (isinstance(value, str) and value in PRECISIONS)),
        "train under torch.autocast: True is float16 with a GradScaler on CUDA and bfloat16 on the CPU; "
        "validation stays in full precision",
        see="[training_monitor.md](training_monitor.md#mixed-precision-and-gradient-accumulation)")
    gradient_accumulation_steps: int = setting(1, whole_number(1, MAX_ACCUMULATION), "batches whose gradients each "
                                               "optimizer step sums, each loss divided by their number",
                                               see="[training_monitor.md](training_monitor.md#mixed-precision-and-gradient-accumulation)")


@dataclass
class Precision:
    """The autocast type of the training forward pass (None: full precision) and the gradient scaler (float16)."""

    device_type: str
    dtype: Optional[torch.dtype] = None
    scaler: Optional[torch.amp.GradScaler] = None

    @classmethod
    def of(cls, setting_value: Any, device: torch.device) -> Precision:
        if setting_value is False:
            return cls(device.type)
        if setting_value is True:
            dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
        else:
            dtype = PRECISIONS[setting_value]
        scaler = torch.amp.GradScaler(device.type) if dtype == torch.float16 else None
        return cls(device.type, dtype, scaler)

    def autocast(self) -> AbstractContextManager:
        return torch.autocast(self.device_type, dtype=self.dtype) if self.dtype is not None else \
            contextlib.nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def describe(self) -> str:
        if self.dtype is None:
            return "full precision"
        scaler = " with a GradScaler" if self.scaler is not None else ""
        return f"mixed precision: autocast to {str(self.dtype).removeprefix('torch.')}{scaler}"


@dataclass
class AccumulationWindow:
    """The batches of one optimizer step: where the epoch's batches fall in windows of ``size`` (the last one of an
    epoch of ``batches`` shorter), and what the open window's batches left for the step."""

    size: int
    batches: Optional[int]  # in an epoch; None where the loader has no length
    position: int = 0  # the next batch's index in the epoch
    losses: list[torch.Tensor] = field(default_factory=list)
    speaker: Optional[dict[str, Any]] = None  # the batch that speaks for the step (see ``add``)
    speaker_finite: bool = True

    def begin_epoch(self) -> None:
        self.position, self.losses, self.speaker = 0, [], None

    @property
    def starts(self) -> bool:
        """The batch about to run opens a window (its gradients start from zero)."""
        return not self.losses

    @property
    def length(self) -> int:
        """The open window's number of batches: ``size``, or fewer for the epoch's last (and 1 for batches beyond the
        epoch's count, which a caller stepping without ``begin_epoch`` gives: each is then a step of its own)."""
        start = self.position - len(self.losses)
        return self.size if self.batches is None else max(1, min(self.size, self.batches - start))

    @property
    def ends(self) -> bool:
        """The batch about to run closes the window (the optimizer steps after it)."""
        return len(self.losses) + 1 >= self.length

    def add(self, batch: dict[str, Any], loss: torch.Tensor, value: float) -> None:
        """A batch of the window, its loss and that loss's value. The batch kept to speak for the step is the first
        whose loss is not finite (a NaN's origin is searched for in it), else the last: one batch is held, not k."""
        self.losses.append(loss.detach())
        if self.speaker is None or self.speaker_finite:
            self.speaker, self.speaker_finite = batch, math.isfinite(value)
        self.position += 1

    def close(self) -> tuple[dict[str, Any], torch.Tensor]:
        """The batch that speaks for the step and the window's mean loss; the window is then empty."""
        batch, loss = self.speaker, torch.stack(self.losses).float().mean()
        self.losses, self.speaker = [], None
        return batch, loss

    def steps(self) -> Optional[int]:
        """Optimizer steps in an epoch (None where the loader has no length)."""
        return None if self.batches is None else math.ceil(self.batches / self.size)
