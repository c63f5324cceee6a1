"""A small 1-D CNN for signals (``inputs['signal']``, (B, channels, T)): the reference model for sequence-shaped
feature maps, whose stages give (B, C, T) outputs a ``LayerOutputDebugger`` or ``ActivationStatsDebugger`` captures."""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn


def _conv_block(in_channels: int, out_channels: int, kernel_size: int, pool: bool) -> nn.Sequential:
    """conv-bn-relu, halving the length when ``pool`` is set. BatchNorm momentum 0.3 as in ``SmallCNN``: running
    statistics keep up with weights that Adam moves fast on small data."""
    layers = OrderedDict(
        conv=nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False),
        bn=nn.BatchNorm1d(out_channels, momentum=0.3),
        relu=nn.ReLU(),
    )
    if pool:
        layers["pool"] = nn.MaxPool1d(2)
    return nn.Sequential(layers)


class SignalCNN(nn.Module):
    """Conv1d stages ``backbone.stage1``.. (each ``conv``, ``bn``, ``relu``; all but the last halve the length) and
    a time-pooled linear ``head``.

    The last stage keeps a time axis (T / 4 with three stages), so a debugger on it sees (B, C, T') features.
    """

    def __init__(self, num_classes: int = 4, in_channels: int = 1, widths: tuple[int, ...] = (16, 32, 32),
                 kernel_size: int = 7) -> None:
        super().__init__()
        if not widths:
            raise ValueError("widths must give at least one channel count (one per stage)")
        channels = (in_channels, *widths)
        self.backbone = nn.Sequential(OrderedDict(
            (f"stage{i + 1}", _conv_block(channels[i], channels[i + 1], kernel_size, pool=i < len(widths) - 1))
            for i in range(len(widths))))
        self.head = nn.Sequential(OrderedDict(
            pool=nn.AdaptiveAvgPool1d(1),
            flatten=nn.Flatten(),
            fc=nn.Linear(widths[-1], num_classes),
        ))

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"logits": self.head(self.backbone(inputs["signal"]))}
