"""Which dimension of a module's output tensors is the batch: known, never guessed from sizes.

Lantern's contract is batch first, but sequence-first code is common: ``nn.MultiheadAttention``,
``nn.LSTM``/``nn.GRU``/``nn.RNN`` and ``nn.Transformer*`` layers with ``batch_first=False`` return
``(L, B, E)``, and an RNN's hidden states are ``(layers, B, H)`` whatever ``batch_first`` says. Matching
sizes cannot tell ``(L, B, E)`` from ``(B, L, E)`` when L == B, so a dimension is taken from, in order:

1. a declaration: ``{'encoder.*': 1}``, fnmatch patterns of module names (a debugger's ``batch_dims``);
2. the module's type and ``batch_first`` flag (the modules above, and every module inside a
   ``nn.TransformerEncoderLayer``/``nn.TransformerDecoderLayer``, which run on its layout);
3. the contract: dimension 0.

A tensor whose batch dimension (so found) does not have the batch's size has no known batch
dimension: callers say so in their output instead of splitting it by a guess.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any, Optional

from torch import nn

from utils.errors import ConfigError

_SEQ_LAYERS = (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)


def check_declared(batch_dims: Optional[Mapping[str, int]], debugger: str) -> dict[str, int]:
    """A debugger's ``batch_dims`` argument, checked: {module-name pattern: dimension >= 0}."""
    if batch_dims is None:
        return {}
    if not isinstance(batch_dims, Mapping) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
            for k, v in batch_dims.items()):
        raise ConfigError(f"{debugger} batch_dims must map module-name patterns to the batch dimension of their "
                          f"outputs, e.g. {{'encoder.*': 1}} for (L, B, E) outputs; got {batch_dims!r}")
    return dict(batch_dims)


class BatchDims:
    """The batch dimension of each output tensor of each module of one model."""

    def __init__(self, model: nn.Module, declared: Optional[Mapping[str, int]] = None) -> None:
        self._first: dict[str, int] = {}  # of the first output tensor (and of the inputs)
        self._rest: dict[str, int] = {}  # of the others: an RNN's (layers, B, H) states, MHA's (B, ...) weights
        inherited: dict[str, int] = {}
        for name, module in model.named_modules():
            own = _declared_dim(name, declared or {})
            if own is not None:
                self._first[name] = self._rest[name] = own
                continue
            own = _type_dim(module)
            if own is None:
                own = next((dim for prefix, dim in inherited.items() if name.startswith(prefix + ".")), 0)
            if isinstance(module, _SEQ_LAYERS):
                inherited[name] = own
            self._first[name] = own
            self._rest[name] = 1 if isinstance(module, nn.RNNBase) else 0 if isinstance(
                module, nn.MultiheadAttention) else own

    def of_outputs(self, name: str, count: int) -> list[int]:
        """The batch dimension of each of module ``name``'s ``count`` output tensors (``iter_tensors`` order)."""
        return [self._first.get(name, 0)] + [self._rest.get(name, 0)] * (count - 1)

    def of_inputs(self, name: str) -> int:
        """The batch dimension of the module's input tensors: its own layout."""
        return self._first.get(name, 0)


def _declared_dim(name: str, declared: Mapping[str, int]) -> Optional[int]:
    return next((dim for pattern, dim in declared.items() if fnmatch.fnmatchcase(name, pattern)), None)


def _type_dim(module: nn.Module) -> Optional[int]:
    if isinstance(module, (nn.MultiheadAttention, nn.RNNBase)):
        return 0 if module.batch_first else 1
    if isinstance(module, _SEQ_LAYERS):
        return 0 if module.self_attn.batch_first else 1
    if isinstance(module, nn.TransformerEncoder):
        return 0 if module.layers[0].self_attn.batch_first else 1
    return None


def describe_unknown(shape: Any, dim: int, batch: int) -> str:
    """Why a tensor could not be split per datapoint, for outputs that must say so."""
    return (f"shape {tuple(shape)}: dimension {dim} is not the batch of {batch}; declare the batch dimension "
            "(batch_dims={'<module pattern>': dim}) to attribute it per datapoint")
