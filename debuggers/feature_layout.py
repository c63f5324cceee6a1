"""Which dimension of a layer's output holds its units, and which of its positions are real.

A feature space is pooled over its positions with its units kept, and a unit is patched along its own dimension,
so both need the output's layout. Two layouts, named in a capture's metadata (``'layout'``):

- ``CHANNELS_FIRST``, (B, C, *positions): convolutions and what follows them (batch, instance and group norms,
  conv pooling), units on dim 1 and 1 to 3 position dims after it (time; rows and columns; depth, rows, columns);
- ``TOKENS``, (B, T, D): linear layers, layer norms, embeddings, attention and transformer blocks, units last and
  tokens on dim 1; where the batch's inputs hold an attention mask of T tokens (``inputs['attention_mask']``, 1 on
  real tokens, as Hugging Face's), its padding is left out of every mean.

The rule (``output_layout``): the type of the module itself, else of the last module registered inside it that has
one (a conv block ends in a conv, norm or pool; a transformer block in a Linear); a (B, C) output is the same in
both. A module of plain tensor code with neither reads as tokens when dim 1 of its output has the length of the
batch's attention mask, else as channels-first (the convolutional convention ``LayerOutputDebugger`` pools by).
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import nn

CHANNELS_FIRST = "channels_first"
TOKENS = "tokens"
LAYOUTS = (CHANNELS_FIRST, TOKENS)
MASK_KEY = "attention_mask"

_CHANNELS_FIRST_TYPES = (nn.modules.conv._ConvNd, nn.modules.batchnorm._BatchNorm,
                         nn.modules.instancenorm._InstanceNorm, nn.GroupNorm, nn.modules.pooling._MaxPoolNd,
                         nn.modules.pooling._AvgPoolNd, nn.modules.pooling._AdaptiveAvgPoolNd,
                         nn.modules.pooling._AdaptiveMaxPoolNd)
_TOKEN_TYPES = (nn.Linear, nn.LayerNorm, nn.RMSNorm, nn.Embedding, nn.MultiheadAttention)


def module_layout(module: nn.Module) -> Optional[str]:
    """The layout the module's type says, else the last typed module registered inside it; None where none has
    one."""
    for inner in reversed(list(module.modules())):  # modules() starts with the module itself
        if isinstance(inner, _CHANNELS_FIRST_TYPES):
            return CHANNELS_FIRST
        if isinstance(inner, _TOKEN_TYPES):
            return TOKENS
    return None


def output_layout(module: nn.Module, output: torch.Tensor, inputs: Any = None) -> str:
    """The layout of ``module``'s batched ``output`` (the rule of the module docstring)."""
    found = module_layout(module)
    if found is not None:
        return found
    return TOKENS if output.ndim == 3 and token_mask(inputs, output) is not None else CHANNELS_FIRST


def unit_dim(ndim: int, layout: str) -> int:
    """The dim of a batched output that holds the units."""
    return ndim - 1 if layout == TOKENS and ndim >= 3 else 1


def token_mask(inputs: Any, output: torch.Tensor, key: str = MASK_KEY) -> Optional[torch.Tensor]:
    """(B, T) bool, True on real tokens: ``inputs[key]`` where it is a (B, T) tensor matching ``output``'s first two
    dims; None otherwise."""
    mask = inputs.get(key) if isinstance(inputs, dict) else None
    if not isinstance(mask, torch.Tensor) or mask.ndim != 2 or output.ndim < 3 \
            or tuple(mask.shape) != tuple(output.shape[:2]):
        return None
    return mask.to(device=output.device) != 0


def pooled_units(output: torch.Tensor, layout: str, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """(B, units): the mean over every position of each datapoint, over its real tokens only where ``mask`` (B, T)
    says which are."""
    dim = unit_dim(output.ndim, layout)
    values = output.movedim(dim, -1).flatten(1, -2) if output.ndim > 2 else output[:, None]
    if mask is None or layout != TOKENS or output.ndim != 3:
        return values.mean(dim=1)
    weights = mask.to(values.dtype)[..., None]
    return (values * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)
