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


class SmallCNN(nn.Module):
    """Four conv stages (``backbone.layer1``..``layer4``) and a pooled linear ``head``.

    ``backbone.layer4`` keeps a spatial map (4x4 at 32px input) so that Grad-CAM
    hooked on it yields a meaningful heatmap.
    """

    def __init__(
        self,
        num_classes: int = 6,
        in_channels: int = 3,
        widths: tuple[int, int, int, int] = (16, 32, 64, 64),
    ) -> None:
        super().__init__()
        if len(widths) != 4:
            raise ValueError(f"widths must give 4 channel counts (one per layer), got {widths}")
        channels = (in_channels, *widths)
        self.backbone = nn.Sequential(
            OrderedDict((f"layer{i + 1}", _conv_block(channels[i], channels[i + 1], pool=i < 3)) for i in range(4))
        )
        self.head = nn.Sequential(
            OrderedDict(
                pool=nn.AdaptiveAvgPool2d(1),
                flatten=nn.Flatten(),
                fc=nn.Linear(widths[-1], num_classes),
            )
        )

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"logits": self.head(self.backbone(inputs["image"]))}
