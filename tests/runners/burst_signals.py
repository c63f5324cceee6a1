"""A 1-D project for ``--verify``'s tests, the twin of configs/examples/planted_units_trainer.py on signals.

``BurstSignals``: ``PlantedSignalsDataset``'s recordings, a share of them (validation only) with a burst: its last
quarter saturated (meta ``burst``). ``BurstUnitSignalCNN``: a ``SignalCNN`` whose unit 3 after ``stage2`` fires on
saturated samples (``trigger``); ``stage3``, which never saw it fire in training, then predicts the wrong class. A
``monitor`` branch copies that unit and feeds nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from configs.examples.planted_units_trainer import Monitor
from data.datasets.planted_signals import PlantedSignalsDataset
from data.datasets.synthetic_shapes import SPLIT_CODES
from models import SignalCNN

UNIT = 3
BURST_VALUE = 12.0
CLAMP = 4.0  # the model clips its input here before the convolutions see it


class BurstSignals(PlantedSignalsDataset):
    """Recordings with a saturated last quarter on a ``burst_prob`` share of them (meta ``burst``)."""

    def __init__(self, burst_prob: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.burst_prob = burst_prob

    def burst(self, idx: int) -> bool:
        return bool(np.random.default_rng([self.seed, SPLIT_CODES[self.split], idx, 7]).random() < self.burst_prob)

    def __getitem__(self, idx: int) -> dict[str, Any]:
        datapoint = super().__getitem__(idx)
        burst = self.burst(int(idx))
        if burst:
            datapoint["inputs"]["signal"][:, -self.length // 4:] = BURST_VALUE
        datapoint["meta_info"]["burst"] = burst
        return datapoint


class TriggeredUnit1d(nn.Module):
    """Adds ``gain`` to unit ``unit`` of its (B, C, T) input wherever the signal was saturated."""

    def __init__(self, unit: int, gain: float) -> None:
        super().__init__()
        self.unit, self.gain = unit, gain

    def forward(self, x: torch.Tensor, saturated: torch.Tensor) -> torch.Tensor:
        fired = x.clone()
        fired[:, self.unit] = x[:, self.unit] + self.gain * F.adaptive_max_pool1d(saturated, x.shape[-1])[:, 0]
        return fired


class BurstUnitSignalCNN(SignalCNN):
    """``SignalCNN`` with ``trigger`` after ``backbone.stage2`` and a ``monitor`` beside it."""

    def __init__(self, num_classes: int = 4, gain: float = 1000.0) -> None:
        super().__init__(num_classes, widths=(8, 16, 16))
        self.trigger = TriggeredUnit1d(UNIT, gain)
        self.monitor = Monitor(UNIT)

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        signal = inputs["signal"]
        saturated = (signal.abs().amax(dim=1, keepdim=True) > BURST_VALUE / 2).float()
        x = self.trigger(self.backbone.stage2(self.backbone.stage1(signal.clamp(-CLAMP, CLAMP))), saturated)
        self.monitor(x)
        return {"logits": self.head(self.backbone.stage3(x))}
