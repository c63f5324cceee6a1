"""A small, readable CNN: the reference model for Grad-CAM style debuggers."""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn


def _conv_block(in_channels: int, out_channels: int, pool: bool) -> nn.Sequential:
    """conv3x3-bn-relu, halving the resolution when ``pool`` is set.

    BatchNorm momentum is 0.3 (not 0.1) so that running statistics keep up with
    weights that Adam moves fast on small data; with 0.1 eval accuracy swings by
    20 points between epochs while batch-statistics accuracy is steady.
    """
    layers = OrderedDict(
        conv=nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
        bn=nn.BatchNorm2d(out_channels, momentum=0.3),
        relu=nn.ReLU(inplace=True),
    )
    if pool:
        layers["pool"] = nn.MaxPool2d(2)
    return nn.Sequential(layers)


class OverflowGate(nn.Module):
    """Emulates an operation that overflows on extreme activations (as a float16 layer would): a datapoint
    whose activation here exceeds ``threshold`` comes out all NaN; every other one passes unchanged."""

    def __init__(self, threshold: float) -> None:
        super().__init__()
        self.threshold = threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        overflow = x.flatten(1).abs().amax(dim=1) > self.threshold
        return x.masked_fill(overflow.view(-1, *([1] * (x.dim() - 1))), float("nan"))


class DeadChannel(nn.Module):
    """Zeroes one channel for every input: a unit that never responds."""

    def __init__(self, channel: int) -> None:
        super().__init__()
        self.channel = channel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = torch.ones(x.shape[1], device=x.device, dtype=x.dtype)
        mask[self.channel] = 0
        return x * mask.view(1, -1, *([1] * (x.dim() - 2)))


class SmallCNN(nn.Module):
    """Four conv stages (``backbone.layer1``..``layer4``) and a pooled linear ``head``.

    ``backbone.layer4`` keeps a spatial map (4x4 at 32px input) so that Grad-CAM
    hooked on it yields a meaningful heatmap.

    Planted causes of failure (off by default): ``nan_layer='backbone.layerK'`` ends that stage with an
    ``OverflowGate`` (module ``backbone.layerK.overflow``) that turns datapoints with activations above
    ``nan_threshold`` into NaN; ``dead_channel=('backbone.layerK', c)`` ends that stage with a
    ``DeadChannel`` (``backbone.layerK.dead``) that zeroes channel ``c``.
    """

    def __init__(
        self,
        num_classes: int = 6,
        in_channels: int = 3,
        widths: tuple[int, int, int, int] = (16, 32, 64, 64),
        nan_layer: str | None = None,
        nan_threshold: float = 1e3,
        dead_channel: tuple[str, int] | None = None,
    ) -> None:
        super().__init__()
        if len(widths) != 4:
            raise ValueError(f"widths must give 4 channel counts (one per layer), got {widths}")
        channels = (in_channels, *widths)
        self.backbone = nn.Sequential(
            OrderedDict((f"layer{i + 1}", _conv_block(channels[i], channels[i + 1], pool=i < 3)) for i in range(4))
        )
        if nan_layer is not None:
            self._stage(nan_layer).add_module("overflow", OverflowGate(nan_threshold))
        if dead_channel is not None:
            layer, channel = dead_channel
            stage = self._stage(layer)
            if not 0 <= channel < stage.conv.out_channels:
                raise ValueError(f"dead_channel {channel} is not a channel of {layer} "
                                 f"(0..{stage.conv.out_channels - 1})")
            stage.add_module("dead", DeadChannel(channel))
        self.head = nn.Sequential(
            OrderedDict(
                pool=nn.AdaptiveAvgPool2d(1),
                flatten=nn.Flatten(),
                fc=nn.Linear(widths[-1], num_classes),
            )
        )

    def _stage(self, name: str) -> nn.Sequential:
        stages = [f"backbone.{child}" for child in self.backbone._modules]
        if name not in stages:
            raise ValueError(f"{name!r} is not a stage of SmallCNN; use one of {stages}")
        return self.backbone.get_submodule(name.removeprefix("backbone."))

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"logits": self.head(self.backbone(inputs["image"]))}
