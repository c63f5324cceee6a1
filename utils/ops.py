"""Tensors inside nested containers: apply a function to each, read indices, describe a value in a message."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def apply_tensor_op(func: Callable[[torch.Tensor], Any], inputs: Any) -> Any:
    """Return ``inputs`` with ``func`` applied to each tensor, keeping the structure.

    Dicts, lists and tuples (named tuples included) are rebuilt; every other
    leaf is returned unchanged.
    """
    if isinstance(inputs, torch.Tensor):
        return func(inputs)
    if isinstance(inputs, dict):
        return {k: apply_tensor_op(func, v) for k, v in inputs.items()}
    if isinstance(inputs, tuple) and hasattr(inputs, "_fields"):
        return type(inputs)(*(apply_tensor_op(func, v) for v in inputs))
    if isinstance(inputs, (list, tuple)):
        return type(inputs)(apply_tensor_op(func, v) for v in inputs)
    return inputs


def idx_list(idx: Any) -> list[int]:
    """``meta_info['idx']`` as a list of ints: it may be an int, a list or a (B,) tensor."""
    if isinstance(idx, torch.Tensor):
        return [int(i) for i in idx.reshape(-1).tolist()]
    if isinstance(idx, (list, tuple)):
        return [int(i) for i in idx]
    return [int(idx)]


def describe_value(value: Any, limit: int = 80) -> str:
    """A short phrase for an error message ("a Tensor of shape (2, 3)", "a str ('cat')"): what a user's code
    returned, without printing a whole tensor or list."""
    if isinstance(value, torch.Tensor):
        return f"a Tensor of shape {tuple(value.shape)}"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)} item(s)"
    text = repr(value)
    return f"a {type(value).__name__} ({text if len(text) <= limit else text[:limit - 3] + '...'})"
