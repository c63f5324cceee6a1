"""Per-layer norms of parameters and gradients, computed on the device in a few batched calls.

A layer is a module with parameters of its own (``named_modules`` order, the model itself named
``(model)``), as in ``GradientFlowDebugger``. Norms of every tensor come from ``torch._foreach_norm`` (one fused
pass per device and dtype, as ``clip_grad_norm_`` does) and are summed per layer with one ``index_add``, so a
model of any depth costs a handful of kernel launches and nothing leaves the device until the caller fetches
the result (once).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from debuggers.outputs import ROOT_MODULE_NAME

_WIDENED = (torch.float16, torch.bfloat16)  # their norms overflow at 65504 (float16): summed in float32


@dataclass
class ModelLayers:
    """The layers of a model and its distinct parameters, with which layer owns which parameter."""

    names: list[str]
    types: list[str]
    params: list[torch.nn.Parameter]  # each parameter once (a tied one belongs to each layer holding it)
    pair_param: torch.Tensor  # (pairs,) parameter index of each (layer, parameter) pair
    pair_layer: torch.Tensor  # (pairs,) layer index of each pair
    trainable: list[bool]  # per layer: any parameter requires grad

    @classmethod
    def of(cls, model: torch.nn.Module) -> ModelLayers:
        names, types, params, pairs, trainable = [], [], [], [], []
        position: dict[int, int] = {}
        for name, module in model.named_modules():
            own = list(module.parameters(recurse=False))
            if not own:
                continue
            for param in own:
                if id(param) not in position:
                    position[id(param)] = len(params)
                    params.append(param)
                pairs.append((position[id(param)], len(names)))
            names.append(name or ROOT_MODULE_NAME)
            types.append(type(module).__name__)
            trainable.append(any(p.requires_grad for p in own))
        pair_param, pair_layer = (torch.tensor([pair[i] for pair in pairs], dtype=torch.long) for i in (0, 1))
        return cls(names, types, params, pair_param, pair_layer, trainable)

    @property
    def parameter_counts(self) -> list[int]:
        counts = [0] * len(self.names)
        for param, layer in zip(self.pair_param.tolist(), self.pair_layer.tolist()):
            counts[layer] += self.params[param].numel()
        return counts

    def per_layer(self, squares: torch.Tensor) -> torch.Tensor:
        """(L,) sums of the parameters' ``squares`` (P,) per layer, on the squares' device."""
        device = squares.device
        return torch.zeros(len(self.names), dtype=squares.dtype, device=device).index_add_(
            0, self.pair_layer.to(device), squares[self.pair_param.to(device)])


def tensor_norms(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The 2-norm of each tensor (0-d, float32 or wider), in order: one fused call per dtype."""
    norms: list = [None] * len(tensors)
    for widen in (False, True):
        chosen = [i for i, t in enumerate(tensors) if (t.dtype in _WIDENED) == widen]
        if chosen:
            found = torch._foreach_norm([tensors[i] for i in chosen], 2, dtype=torch.float32 if widen else None)
            for i, norm in zip(chosen, found):
                norms[i] = norm
    return norms


def squares_on(norms: Sequence[torch.Tensor], count: int, present: Sequence[int], device: torch.device
               ) -> torch.Tensor:
    """(count,) float64 squares of ``norms`` (float64: a norm past 1e19 squares beyond float32), which belong
    to the positions ``present`` (the others are 0)."""
    squares = torch.zeros(count, dtype=torch.float64, device=device)
    if norms:
        stacked = torch.stack([n.to(device=device, dtype=torch.float64) for n in norms])
        squares[torch.tensor(list(present), dtype=torch.long, device=device)] = stacked * stacked
    return squares
