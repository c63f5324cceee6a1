"""Architectures of the compatibility suite, built in the tests: the shapes of real models, tiny.

* ``TinyResNet``: a torchvision-style ResNet block stack (BatchNorm, ``ReLU(inplace=True)``,
  ``out += identity``); ``frozen_backbone=True`` freezes everything below the head, as when fine-tuning.
* ``SeqFirstClassifier``: token embeddings run sequence-first, ``(L, B, E)``, through an
  ``nn.LSTM`` and an ``nn.MultiheadAttention`` (both ``batch_first=False``), as older transformer code does.

Every model follows Lantern's contract ``forward(inputs: dict) -> {'logits': (B, K)}``.
"""

from __future__ import annotations

import torch
from torch import nn

from debuggers.capture import capture_debug_state


class BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock: conv-bn-relu(inplace)-conv-bn, ``out += identity``, relu(inplace)."""

    def __init__(self, in_channels: int, channels: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.downsample = None
        if stride != 1 or in_channels != channels:
            self.downsample = nn.Sequential(nn.Conv2d(in_channels, channels, 1, stride, bias=False),
                                            nn.BatchNorm2d(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class TinyResNet(nn.Module):
    def __init__(self, num_classes: int = 5, width: int = 8, frozen_backbone: bool = False) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(inplace=True))
        self.layer1 = BasicBlock(width, width)
        self.layer2 = BasicBlock(width, 2 * width, stride=2)
        self.fc = nn.Linear(2 * width, num_classes)
        if frozen_backbone:
            for module in (self.stem, self.layer1, self.layer2):
                module.requires_grad_(False)
        _randomise_batchnorm(self)

    def forward(self, inputs: dict) -> dict:
        features = self.layer2(self.layer1(self.stem(inputs["image"])))
        pooled = features.mean(dim=(2, 3))
        capture_debug_state("head", "embedding", pooled)
        return {"logits": self.fc(pooled)}


class SeqFirstClassifier(nn.Module):
    """Embeddings -> (L, B, E) -> LSTM -> MultiheadAttention (padding masked) -> LayerNorm -> mean -> logits.

    Token 0 is padding; a datapoint made only of padding has every key masked, so the attention makes NaN
    for it alone (a real way NaN appears in sequence models).
    """

    def __init__(self, vocab: int = 20, dim: int = 16, heads: int = 2, num_classes: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim)
        self.attn = nn.MultiheadAttention(dim, heads)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, inputs: dict) -> dict:
        tokens = inputs["tokens"]
        x = self.embed(tokens).transpose(0, 1)  # (L, B, E)
        x, _ = self.lstm(x)
        capture_debug_state("lstm", "states", x, {"batch_dim": 1})  # sequence-first, declared
        x, _ = self.attn(x, x, x, key_padding_mask=tokens == 0)
        x = self.norm(x)  # (L, B, E): no type says so, a debugger must be told (batch_dims={'norm': 1})
        return {"logits": self.head(x.mean(dim=0))}


def _randomise_batchnorm(model: nn.Module) -> None:
    """Non-trivial running statistics, so eval mode matters."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 1.5)


class TokenEncoder(nn.Module):
    """Padded token sequences (token 0 is padding) through ``nn.TransformerEncoder`` with a padding mask;
    ``nested=True`` lets eval + no_grad take its nested-tensor fast path (padded rows come back as zeros)."""

    def __init__(self, vocab: int = 20, dim: int = 16, heads: int = 2, num_classes: int = 3,
                 nested: bool = False, batch_first: bool = True) -> None:
        super().__init__()
        self.batch_first = batch_first
        self.embed = nn.Embedding(vocab, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, batch_first=batch_first)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=nested)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, inputs: dict) -> dict:
        tokens = inputs["tokens"]
        x = self.embed(tokens)
        x = self.encoder(x if self.batch_first else x.transpose(0, 1), src_key_padding_mask=tokens == 0)
        x = x if self.batch_first else x.transpose(0, 1)
        real = (tokens != 0).unsqueeze(-1).to(x.dtype)
        return {"logits": self.head((x * real).sum(1) / real.sum(1).clamp(min=1))}
