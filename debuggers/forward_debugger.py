"""``ForwardDebugger``: capture what one layer computes, through a forward hook."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import torch

from debuggers.base_debugger import BaseDebugger
from debuggers.outputs import not_run_output
from debuggers.utils import compiled_hint, require_layer
from utils.ops import apply_tensor_op


class ForwardDebugger(BaseDebugger):
    """Base class for debuggers that use a PyTorch forward hook on ``layer_name``.

    ``process_forward(module, input, output)`` receives the layer's output for
    the **whole batch** and must return values with the batch first, e.g.
    ``output.detach()`` or ``output.mean(dim=(1, 2, 3))`` rather than
    ``float(output.mean())`` (a number would be one value for the whole batch).

    The hook is installed by ``SequentialDebugger`` only while capture is
    enabled. Returned tensors that share memory with the layer's output (such as
    ``output.detach()``) are copied, because a later in-place operation
    (``nn.ReLU(inplace=True)``) would otherwise change the capture. A failure
    inside ``process_forward`` never breaks the model's forward pass: it is kept
    and re-raised when the debugger is called, so it is recorded as this
    debugger's error.
    """

    def __init__(self, layer_name: str) -> None:
        self.layer_name = layer_name
        self.last_capture: Any = None
        self._captured = False
        self._failure: Exception | None = None

    def forward_hook_fn(self, module: torch.nn.Module, input: Any, output: Any) -> None:
        """PyTorch forward hook: process the output; the last call in a forward pass wins."""
        try:
            self.last_capture = own_copies(self.process_forward(module, input, output), output)
            self._failure = None
        except Exception as exc:  # kept for __call__: a debugger must not break the model
            self.last_capture, self._failure = None, exc
        self._captured = True

    @abstractmethod
    def process_forward(self, module: torch.nn.Module, input: Any, output: Any) -> Any:
        """Turn the layer's batch output into this debugger's output (batch first)."""
        raise NotImplementedError

    def __call__(self, datapoint: dict[str, Any], model: torch.nn.Module) -> Any:
        """Return the capture of this batch's forward pass, never a previous batch's."""
        if self._failure is not None:
            raise self._failure
        if not self._captured:
            return not_run_output(f"layer '{self.layer_name}' did not run in this forward pass{compiled_hint(model)}")
        return self.last_capture

    def layer_names(self) -> list[str]:
        return [self.layer_name]

    def attach(self, model: torch.nn.Module) -> list:
        return [require_layer(model, self.layer_name).register_forward_hook(self.forward_hook_fn)]

    def clear(self) -> None:
        self.last_capture, self._captured, self._failure = None, False, None


def own_copies(capture: Any, module_output: Any) -> Any:
    """``capture`` with every tensor that aliases ``module_output``'s memory replaced by a copy."""
    live: set[int] = set()
    apply_tensor_op(lambda t: live.add(t.untyped_storage().data_ptr()), module_output)
    if not live:
        return capture
    return apply_tensor_op(lambda t: t.clone() if t.untyped_storage().data_ptr() in live else t, capture)
