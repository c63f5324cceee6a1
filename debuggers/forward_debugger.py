"""``ForwardDebugger``: capture what one layer computes, through a forward hook."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import torch

from debuggers.base_debugger import BaseDebugger
from debuggers.batch_dims import BatchDims
from debuggers.batch_mode import BATCHED, batch_mode_check
from debuggers.batch_split import BatchContractError
from debuggers.datapoint_slices import HookedCall, datapoint_batch_size
from debuggers.outputs import not_run_output
from debuggers.utils import compiled_hint, require_layer
from utils.ops import apply_tensor_op


class ForwardDebugger(BaseDebugger):
    """Base class for debuggers that use a PyTorch forward hook on ``layer_name``.

    ``process_forward(module, input, output)`` receives the layer's output for
    the **whole batch** and should return values with the batch first, e.g.
    ``output.detach()`` or ``output.mean(dim=(1, 2, 3))`` rather than
    ``float(output.mean())`` (a number would be one value for the whole batch).
    One written for a single datapoint per forward pass runs per datapoint instead:
    ``process_forward`` is called on each datapoint's slice of the layer's input and
    output (``debuggers/batch_mode.py``; ``batch_mode`` declares which).

    The hook is installed by ``SequentialDebugger`` only while capture is
    enabled. Returned tensors that share memory with the layer's output (such as
    ``output.detach()``) are copied, because a later in-place operation
    (``nn.ReLU(inplace=True)``) would otherwise change the capture. A failure
    inside ``process_forward`` never breaks the model's forward pass: it is kept
    and re-raised when the debugger is called, so it is recorded as this
    debugger's error.
    """

    _hooked_batch: int | None = None  # the batch size a hook cut into datapoints
    _batch_dims: BatchDims | None = None  # which dimension of the layer's tensors is the batch (set by attach)

    def __init__(self, layer_name: str) -> None:
        self.layer_name = layer_name
        self.last_capture: Any = None
        self._captured = False
        self._failure: Exception | None = None

    def forward_hook_fn(self, module: torch.nn.Module, input: Any, output: Any) -> None:
        """PyTorch forward hook: process the output; the last call in a forward pass wins."""
        try:
            self.last_capture = self._process(module, input, output)
            self._failure = None
        except Exception as exc:  # kept for __call__: a debugger must not break the model
            self.last_capture, self._failure = None, exc
        self._captured = True

    def _process(self, module: torch.nn.Module, input: Any, output: Any) -> Any:
        """``process_forward`` of the batch, or of each datapoint's slice of it (``debuggers/batch_mode.py``)."""
        live = storages(output)
        check = batch_mode_check(self)
        self._hooked_batch = None
        if check.mode == BATCHED:
            return own_copies(self.process_forward(module, input, output), live)
        call = HookedCall(self.layer_name, input, output, self._batch_dims)
        self._hooked_batch = call.batch_size
        return check.run(lambda: own_copies(self.process_forward(module, input, output), live),
                         lambda i: own_copies(self.process_forward(module, *call.alone(i)), live), call.batch_size)

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
        if self._hooked_batch not in (None, datapoint_batch_size(datapoint)):
            raise BatchContractError(
                f"layer '{self.layer_name}' gave {self._hooked_batch} datapoint(s) along its batch dimension but the "
                f"batch has {datapoint_batch_size(datapoint)}, so it cannot be run per datapoint; declare "
                "batch_mode = 'batched' on the class if process_forward returns batch-first outputs")
        return self.last_capture

    def layer_names(self) -> list[str]:
        return [self.layer_name]

    def attach(self, model: torch.nn.Module) -> list:
        layer = require_layer(model, self.layer_name)
        if batch_mode_check(self).mode != BATCHED:  # which dimension of the layer's tensors is the batch
            self._batch_dims = BatchDims(model)
        return [layer.register_forward_hook(self.forward_hook_fn)]

    def clear(self) -> None:
        self.last_capture, self._captured, self._failure = None, False, None


def storages(module_output: Any) -> set[int]:
    """The memory ``module_output``'s tensors live in (which a later in-place op may change)."""
    live: set[int] = set()
    apply_tensor_op(lambda t: live.add(t.untyped_storage().data_ptr()), module_output)
    return live


def own_copies(capture: Any, live: set[int]) -> Any:
    """``capture`` with every tensor that aliases the ``live`` memory (``storages``) replaced by a copy."""
    if not live:
        return capture
    return apply_tensor_op(lambda t: t.clone() if t.untyped_storage().data_ptr() in live else t, capture)
