"""Overfit one batch, the first sanity check of a model that does not train: a model, loss and optimizer that work
memorise one batch, its loss going to about 0. ``config['overfit_one_batch']`` makes each training epoch ``steps``
steps on the same batch (the first of epoch 0's shuffled order) and says, at the epoch's end, whether the loss
reached ``target_loss``; validation runs as usual (it shows how little one batch generalises)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from utils.settings import POSITIVE_NUMBER, Settings, setting, whole_number

MAX_STEPS = 1_000_000


@dataclass(frozen=True)
class OverfitSettings(Settings):
    """``config['overfit_one_batch']``: ``True`` for these defaults, or a dict of some of them."""

    KEY = "overfit_one_batch"
    DOC = ("train each epoch on one batch, again and again, and say whether its loss reaches about 0, the first check "
           "of a model that does not learn: `True` or a dict of settings (off by default)")
    SEE = "[training_monitor.md](training_monitor.md#overfit-one-batch)"

    steps: int = setting(100, whole_number(1, MAX_STEPS), "training steps on the batch in each epoch")
    target_loss: float = setting(0.01, POSITIVE_NUMBER, "the loss below which the batch counts as memorised")


class RepeatedBatch(Sequence):
    """One batch, ``steps`` times: an epoch of the overfit check."""

    def __init__(self, batch: dict[str, Any], steps: int) -> None:
        self.batch, self.steps = batch, steps

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not 0 <= index < self.steps:
            raise IndexError(index)
        return self.batch


def verdict(settings: OverfitSettings, losses: list[float], idx: list[int]) -> tuple[bool, str]:
    """Whether the epoch's last loss on the batch is below the target, and the log line that says so."""
    first, last = losses[0], losses[-1]
    batch = f"one batch (idx {idx[:8]}{' ...' if len(idx) > 8 else ''})"
    trend = f"its loss went from {first:.4g} to {last:.4g} in {len(losses)} steps"
    if math.isfinite(last) and last < settings.target_loss:
        return True, (f"Overfit check: {batch} is memorised: {trend}, below {settings.target_loss:g}: the model, the "
                      "loss and the optimizer can learn")
    return False, (f"Overfit check: {batch} is not memorised: {trend}, not below {settings.target_loss:g}. Check that "
                   "the loss reads the outputs and labels it should, the learning rate (too small or too large), and "
                   "that no layer is detached or frozen by mistake (the training monitor names layers whose gradients "
                   "are missing or zero); more steps may also be needed (config['overfit_one_batch']['steps'])")
