"""``ForwardDebugger``: capture what one layer computes, through a forward hook."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import torch

from debuggers.base_debugger import BaseDebugger
from debuggers.batch_dims import BatchDims
from debuggers.batch_mode import BATCHED, BatchFailure, Ran, batch_mode_check
from debuggers.datapoint_slices import HookedCall
from debuggers.outputs import AloneOutputs
from debuggers.pages.buffer_pool import BufferPool
from debuggers.tensor_utils import iter_tensors
from debuggers.utils import compiled_hint, require_layer
from utils.ops import apply_tensor_op


class ForwardDebugger(BaseDebugger):
    """Base class for debuggers that use a PyTorch forward hook on ``layer_name``.

    ``process_forward(module, input, output)`` receives the layer's output for
    the **whole batch** and should return values with the batch first, e.g.
    ``output.detach()`` or ``output.mean(dim=(1, 2, 3))`` rather than
    ``float(output.mean())`` (a number would be one value for the whole batch).
    Its return value is ``last_capture``, which ``__call__`` returns, as in the seed.
    One written for a single datapoint per forward pass also runs per datapoint:
    ``process_forward`` is called on each datapoint's slice of the layer's input and
    output too, and ``datapoint_captures`` keeps what each gave, for its pages
    (``debuggers/batch_mode.py``; ``batch_mode`` declares which).

    The hook is installed by ``SequentialDebugger`` only while capture is
    enabled. Returned tensors that share memory with the layer's output (such as
    ``output.detach()``) are copied, because a later in-place operation
    (``nn.ReLU(inplace=True)``) would otherwise change the capture. A failure
    inside ``process_forward`` never breaks the model's forward pass: it is kept
    and re-raised when the debugger is called, so it is recorded as this
    debugger's error.
    """

    _batch_dims: BatchDims | None = None  # which dimension of the layer's tensors is the batch (set by attach)
    _model_batch: int | None = None  # the batch the model was called with in this forward pass (set by attach)

    def __init__(self, layer_name: str) -> None:
        self.layer_name = layer_name
        self.last_capture: Any = None
        self.datapoint_captures: AloneOutputs | None = None  # each datapoint's own, where it runs per datapoint
        self.captured_columns: Any = None  # summary_columns of last_capture, computed in the hook (or its error)
        self._captured = False
        self._failure: Exception | None = None
        self._pool = BufferPool()  # copies of the layer's tensors (and scratch), in memory reused batch to batch

    def forward_hook_fn(self, module: torch.nn.Module, input: Any, output: Any) -> None:
        """PyTorch forward hook: process the output; the last call in a forward pass wins."""
        try:
            ran = self._process(module, input, output)
            failed = isinstance(ran.returned, BatchFailure)
            self.last_capture, self._failure = (None, ran.returned.error) if failed else (ran.returned, None)
            self.datapoint_captures = None if ran.pages is ran.returned else ran.pages
        except Exception as exc:  # kept for __call__: a debugger must not break the model
            self.last_capture, self.datapoint_captures, self._failure = None, None, exc
        self.captured_columns = self._columns_now()
        self._captured = True

    def _columns_now(self) -> Any:
        """``summary_columns`` of a batch-first capture that ``__call__`` returns as it is, computed here, while the
        layer's values (and their copy) are still in the CPU's cache: by the time the batch's debuggers are
        called, the rest of the forward pass has pushed them out, and reading them back costs more than the
        arithmetic. None where there is nothing to compute now; what it raised where it failed."""
        plain = type(self).__call__ is ForwardDebugger.__call__
        if not plain or self.datapoint_captures is not None or self.last_capture is None \
                or type(self).summary_columns is BaseDebugger.summary_columns:
            return None
        try:
            return self.capture_columns(self.last_capture)
        except Exception as exc:  # said once by the summaries, as from any summary
            return exc

    def capture_columns(self, capture: Any) -> Any:
        """``summary_columns`` of the batch ``capture`` that ``process_forward`` gave just now, in the hook: a
        debugger that computed what they need there gives them from that, without reading the capture again."""
        return self.summary_columns(capture)

    def _process(self, module: torch.nn.Module, input: Any, output: Any) -> Ran:
        """``process_forward`` of the batch, and of each datapoint's slice of it where it runs per datapoint
        (``debuggers/batch_mode.py``)."""
        live = storages(output)
        check = batch_mode_check(self)
        if check.mode == BATCHED:
            capture = own_copies(self.process_forward(module, input, output), live, self._pool)
            return Ran(capture, capture)
        call = HookedCall(self.layer_name, input, output, self._batch_dims, self._model_batch)
        return check.run(lambda: own_copies(self.process_forward(module, input, output), live, self._pool),
                         lambda i: own_copies(self.process_forward(module, *call.alone(i)), live, self._pool),
                         call.batch_size)

    @abstractmethod
    def process_forward(self, module: torch.nn.Module, input: Any, output: Any) -> Any:
        """Turn the layer's batch output into this debugger's output (batch first)."""
        raise NotImplementedError

    def __call__(self, datapoint: dict[str, Any], model: torch.nn.Module) -> Any:
        """Return the captured data from the forward pass: ``last_capture``, None where the layer did not run."""
        if self._failure is not None:
            raise self._failure
        return self.last_capture

    def not_run_reason(self, model: torch.nn.Module) -> str | None:
        if self._captured:
            return None
        return f"layer '{self.layer_name}' did not run in this forward pass{compiled_hint(model)}"

    def layer_names(self) -> list[str]:
        return [self.layer_name]

    def attach(self, model: torch.nn.Module) -> list:
        layer = require_layer(model, self.layer_name)
        hooked = self.forward_hook_fn in layer._forward_hooks.values()  # by hand, as the seed's trainer does
        handles = [] if hooked else [layer.register_forward_hook(self.forward_hook_fn)]
        if batch_mode_check(self).mode != BATCHED:  # to cut the layer's tensors into datapoints: along which
            self._batch_dims = BatchDims(model)  # dimension, and how many datapoints the batch has
            handles.append(model.register_forward_pre_hook(self._note_model_batch, with_kwargs=True))
        return handles

    def _note_model_batch(self, model: torch.nn.Module, args: Any, kwargs: Any) -> None:
        """The batch size of this forward pass: the first dimension of the model's first input tensor, as
        ``batch_size_of`` reads a datapoint's inputs."""
        self._model_batch = next((int(t.shape[0]) for t in iter_tensors((args, kwargs)) if t.ndim), None)

    def clear(self) -> None:
        self.last_capture, self.datapoint_captures, self._captured, self._failure = None, None, False, None
        self.captured_columns = self._model_batch = None

    def release(self) -> None:
        self._pool.release()


def storages(module_output: Any) -> set[int]:
    """The memory ``module_output``'s tensors live in (which a later in-place op may change)."""
    live: set[int] = set()
    apply_tensor_op(lambda t: live.add(t.untyped_storage().data_ptr()), module_output)
    return live


def own_copies(capture: Any, live: set[int], pool: BufferPool) -> Any:
    """``capture`` with every tensor that aliases the ``live`` memory (``storages``) replaced by a copy, in
    ``pool``'s reused memory: a fresh block for each batch's copy costs more in page faults than in copying."""
    if not live:
        return capture
    return apply_tensor_op(lambda t: pool.copy_of(t) if t.untyped_storage().data_ptr() in live else t, capture)
