"""Find a model's layer from a dotted name such as ``backbone.layer4`` or ``blocks.0.attn``."""

from __future__ import annotations

import difflib
import sys
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


def compiled_hint(model: torch.nn.Module) -> str:
    """Why a hooked layer that ran may look as if it did not: code ``torch.compile`` made calls no hook added
    after it was compiled. '' for a model nothing of which is compiled."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")  # torch.compile imports it (seconds): not here
    compiled = eval_frame is not None and any(
        isinstance(module, eval_frame.OptimizedModule) or getattr(module, "_compiled_call_impl", None) is not None
        for module in model.modules())
    if not compiled:
        return ""
    return ("; the model (or part of it) is compiled with torch.compile, whose compiled code calls no hook added "
            "after it was compiled: attach the debuggers before its first compiled call, or call "
            "torch._dynamo.reset() after attaching them so that it compiles again")
