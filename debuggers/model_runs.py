"""Running the model again from inside a debugger without leaving anything behind.

Debuggers with ``runs_model = True`` (Grad-CAM, gradient flow) run their own
forward and backward passes. They must not change what training sees next:
BatchNorm statistics, dropout, ``.grad`` of parameters and hooks stay as they were.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Evaluation mode inside the block (no BatchNorm update, no dropout); each module's mode restored."""
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for module, training in modes:
            module.training = training


def output_tensor(outputs: object, output_key: str | None, debugger: str) -> torch.Tensor:
    """``outputs[output_key]`` (``outputs`` itself when the key is None) as (B, K) logits, or a clear error."""
    if output_key is None:
        value = outputs
    else:
        value = outputs.get(output_key) if isinstance(outputs, dict) else None
    if not isinstance(value, torch.Tensor) or value.ndim != 2:
        keys = list(outputs) if isinstance(outputs, dict) else type(outputs).__name__
        raise ValueError(f"{debugger} needs the model output '{output_key}' as (B, num_classes) logits; "
                         f"the model returned {keys}. Set output_key to the key of the logits")
    return value
