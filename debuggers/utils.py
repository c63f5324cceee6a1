"""Find a model's layer from a dotted name such as ``backbone.layer4`` or ``blocks.0.attn``."""

from __future__ import annotations

import difflib
from typing import Optional

import torch

from utils.errors import ConfigError


class UnknownLayerError(ConfigError):
    """A debugger names a layer the model does not have."""


def get_layer_by_name(model: torch.nn.Module, layer_name: str) -> Optional[torch.nn.Module]:
    """The module at ``layer_name`` (as in ``model.named_modules()``), or None; '' is the model."""
    return dict(model.named_modules()).get(layer_name)


def require_layer(model: torch.nn.Module, layer_name: str) -> torch.nn.Module:
    """Like ``get_layer_by_name`` but an unknown name raises with the closest existing names."""
    layer = get_layer_by_name(model, layer_name)
    if layer is not None:
        return layer
    names = [name for name, _ in model.named_modules() if name]
    close = difflib.get_close_matches(layer_name, names, n=5, cutoff=0.4)
    top = [name for name, _ in model.named_children()]
    hint = f"closest existing names: {close}" if close else f"top-level modules: {top}"
    raise UnknownLayerError(
        f"{type(model).__name__} has no layer '{layer_name}'; {hint}. "
        "Layer names are the dotted paths of model.named_modules()"
    )
