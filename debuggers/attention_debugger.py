"""``AttentionDebugger``: per-head attention weights of one attention layer, per datapoint."""

from __future__ import annotations

import inspect
from typing import Any, Optional

import torch
from torch import nn

from debuggers.base_debugger import Removable
from debuggers.capture import listen
from debuggers.forward_debugger import ForwardDebugger
from debuggers.outputs import KIND_ATTENTION
from debuggers.tensor_utils import describe
from debuggers.utils import require_layer

_MHA_SIGNATURE = inspect.signature(nn.MultiheadAttention.forward)


class AttentionDebugger(ForwardDebugger):
    """Attention weights (B, heads, Lq, Lk) of ``layer_name`` and how peaked they are.

    Two kinds of layers are understood, and the model's forward output is the same
    as without the debugger in both:

    * ``nn.MultiheadAttention`` (``batch_first`` or not): while attached, each call is
      made with ``need_weights=True, average_attn_weights=False`` and the caller
      gets back exactly what it asked for (no weights, or head-averaged ones). The
      layer then takes its explicit-softmax path, as ``need_weights=True`` always does.
    * any module that offers its weights through a capture point,
      ``capture_debug_state(component, 'attention_weights', weights, {'grid': (h, w)})``,
      inside its forward (like ``models.attention_classifier.MultiHeadSelfAttention``):
      the weights offered while this layer runs are taken, whatever the component name.

    Output ``{'kind': 'attention', 'layer_name', 'attention': (B, heads, Lq, Lk),
    'entropy_per_head': (B, heads)`` (mean over queries of -sum p log p, in nats)``,
    'max_attention': (B,), 'grid': [h, w] or None}``.
    """

    def __init__(self, layer_name: str, state: str = "attention_weights") -> None:
        super().__init__(layer_name)
        self.state = state
        self._inside = False
        self._offered: Optional[tuple[Any, Optional[dict]]] = None
        self._requested = (True, True)

    def attach(self, model: torch.nn.Module) -> list[Removable]:
        layer = require_layer(model, self.layer_name)
        if isinstance(layer, nn.MultiheadAttention):
            return [layer.register_forward_pre_hook(self._force_weights, with_kwargs=True),
                    layer.register_forward_hook(self.forward_hook_fn),
                    layer.register_forward_hook(self._give_caller_its_output, with_kwargs=True)]
        return [layer.register_forward_pre_hook(self._enter), listen(self._on_capture),
                layer.register_forward_hook(self.forward_hook_fn)]

    # ------------------------------------------------------ nn.MultiheadAttention
    def _force_weights(self, module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        arguments = _MHA_SIGNATURE.bind(module, *args, **kwargs).arguments
        arguments.pop("self")
        self._requested = (bool(arguments.get("need_weights", True)), bool(arguments.get("average_attn_weights", True)))
        return (), {**arguments, "need_weights": True, "average_attn_weights": False}

    def _give_caller_its_output(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> Any:
        need_weights, average = self._requested
        if not need_weights:
            return output[0], None
        return (output[0], output[1].mean(dim=-3)) if average else output

    # ---------------------------------------------------------- capture points
    def _enter(self, module: nn.Module, args: tuple) -> None:
        self._inside, self._offered = True, None

    def _on_capture(self, component: str, state: str, data: Any, metadata: Optional[dict]) -> None:
        if self._inside and state == self.state:
            self._offered = (data, metadata)

    # ------------------------------------------------------------------ output
    def process_forward(self, module: nn.Module, input: Any, output: Any) -> dict[str, Any]:
        if isinstance(module, nn.MultiheadAttention):
            weights, metadata = output[1], None
        else:
            self._inside = False
            if self._offered is None:
                raise RuntimeError(
                    f"layer '{self.layer_name}' ({type(module).__name__}) ran but offered no '{self.state}': "
                    "AttentionDebugger reads nn.MultiheadAttention, or a module whose forward calls "
                    f"capture_debug_state(name, '{self.state}', weights) with weights (B, heads, Lq, Lk)")
            weights, metadata = self._offered
        return attention_output(self.layer_name, weights, metadata)

    def clear(self) -> None:
        super().clear()
        self._inside, self._offered = False, None


def attention_output(layer_name: str, weights: Any, metadata: Optional[dict]) -> dict[str, Any]:
    """The attention record of (B, heads, Lq, Lk) (or single-head (B, Lq, Lk)) weights."""
    if not isinstance(weights, torch.Tensor) or weights.ndim not in (3, 4):
        raise TypeError(f"AttentionDebugger needs batched attention weights (B, heads, Lq, Lk) from layer "
                        f"'{layer_name}', got {describe(weights)}; call the layer on a batch")
    probs = weights.detach().float()
    probs = probs.unsqueeze(1) if probs.ndim == 3 else probs.clone()
    grid = (metadata or {}).get("grid")
    return {
        "kind": KIND_ATTENTION,
        "layer_name": layer_name,
        "attention": probs,
        "entropy_per_head": -torch.special.xlogy(probs, probs).sum(-1).mean(-1),
        "max_attention": probs.amax(dim=(1, 2, 3)),
        "grid": [int(g) for g in grid] if grid is not None else None,
    }
