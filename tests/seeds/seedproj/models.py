"""The user's model: it has the layers the seeds' configuration example names (``backbone.layer2`` to
``backbone.layer4``, ``head.attention``), and returns a dict of named outputs as Lantern's models do."""

import torch
from torch import nn


def conv(in_channels: int, out_channels: int, stride: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(in_channels, out_channels, 3, stride, 1), nn.BatchNorm2d(out_channels), nn.ReLU())


class Backbone(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer1, self.layer2 = conv(3, 8, 2), conv(8, 8, 1)
        self.layer3, self.layer4 = conv(8, 16, 2), conv(16, 16, 1)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.layer4(self.layer3(self.layer2(self.layer1(image))))


class Attention(nn.Module):
    """Softmax attention weights (B, L, L) between the tokens: the output the seeds' AttentionDebugger reads."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.query, self.key = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        scores = self.query(tokens) @ self.key(tokens).transpose(1, 2) / tokens.shape[-1] ** 0.5
        return scores.softmax(dim=-1)


class Head(nn.Module):
    def __init__(self, dim: int, num_classes: int) -> None:
        super().__init__()
        self.attention = Attention(dim)
        self.classifier = nn.Linear(dim, num_classes)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        tokens = features.flatten(2).transpose(1, 2)  # (B, h*w, C)
        return self.classifier((self.attention(tokens) @ tokens).mean(dim=1))


class SeedNet(nn.Module):
    def __init__(self, num_classes: int = 6) -> None:
        super().__init__()
        self.backbone = Backbone()
        self.head = Head(16, num_classes)

    def forward(self, inputs: dict) -> dict:
        return {"logits": self.head(self.backbone(inputs["image"]))}
