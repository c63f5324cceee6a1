"""Segmentation models a user brings, for the compatibility suite: a torchvision-style U-Net with ResNet blocks and an
FCN head, and Hugging Face's SegFormer built offline from its config (random weights). Both follow Lantern's
contract, ``forward({'image'}) -> {'logits': (B, K, h, w)}``."""

from __future__ import annotations

from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import nn
from transformers import SegformerConfig, SegformerForSemanticSegmentation

from tests.compat.architectures import BasicBlock

NUM_CLASSES = 3


class FCNHead(nn.Sequential):
    """torchvision's FCN head: conv3x3-bn-relu-dropout, then a 1x1 conv to the classes."""

    def __init__(self, in_channels: int, classes: int) -> None:
        inter = in_channels // 2
        super().__init__(nn.Conv2d(in_channels, inter, 3, padding=1, bias=False), nn.BatchNorm2d(inter),
                         nn.ReLU(), nn.Dropout(0.1), nn.Conv2d(inter, classes, 1))


class UNet(nn.Module):
    """Two down steps of ResNet blocks, two up steps with skip connections, an FCN head at full resolution;
    returns torchvision's ``OrderedDict(out=...)``, wrapped below in Lantern's contract."""

    def __init__(self, classes: int = NUM_CLASSES, width: int = 8) -> None:
        super().__init__()
        self.enc1, self.enc2 = BasicBlock(3, width), BasicBlock(width, 2 * width)
        self.bottleneck = BasicBlock(2 * width, 4 * width)
        self.dec2, self.dec1 = BasicBlock(6 * width, 2 * width), BasicBlock(3 * width, width)
        self.classifier = FCNHead(width, classes)

    def forward(self, image: torch.Tensor) -> OrderedDict:
        e1 = self.enc1(image)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        b = self.bottleneck(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([F.interpolate(b, scale_factor=2.0), e2], dim=1))
        d1 = self.dec1(torch.cat([F.interpolate(d2, scale_factor=2.0), e1], dim=1))
        return OrderedDict(out=self.classifier(d1))


class Segmenter(nn.Module):
    """Lantern's contract around a user's segmentation model: ``{'logits': (B, K, h, w)}``."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, inputs: dict) -> dict:
        output = self.model(inputs["image"]) if isinstance(self.model, UNet) else self.model(
            pixel_values=inputs["image"])
        return {"logits": output["out"] if isinstance(output, dict) and "out" in output else output.logits}


def unet() -> Segmenter:
    torch.manual_seed(0)
    model = Segmenter(UNet())
    for module in model.modules():  # BatchNorm statistics as after training: not all identical
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.2, 0.2)
            module.running_var.uniform_(0.5, 1.5)
    return model.eval()


def segformer() -> Segmenter:
    """A two-stage SegFormer (hidden sizes 16 and 32, the first stage's keys reduced 2x), logits at 1/2."""
    torch.manual_seed(0)
    config = SegformerConfig(num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                             hidden_sizes=[16, 32], patch_sizes=[3, 3], strides=[2, 2], num_attention_heads=[1, 2],
                             mlp_ratios=[2, 2], decoder_hidden_size=32, num_labels=NUM_CLASSES)
    return Segmenter(SegformerForSemanticSegmentation(config)).eval()


def class_map_batches(images: torch.Tensor, labels: torch.Tensor, batch_size: int) -> list[dict]:
    return [{"inputs": {"image": images[s:s + batch_size]}, "labels": {"mask": labels[s:s + batch_size]},
             "meta_info": {"idx": torch.arange(s, min(s + batch_size, len(images)))}}
            for s in range(0, len(images), batch_size)]
