"""One datapoint's slice of a batch, as a debugger would have seen it at batch 1.

Used to run a debugger per datapoint (``debuggers/batch_mode.py``): a ``BaseDebugger`` gets
``datapoint_slice`` of the collated datapoint, a ``ForwardDebugger`` ``HookedCall.alone(i)`` of the
layer's input and output. Which dimension of a tensor is the batch is known, never guessed from sizes
(``debuggers/batch_dims.py``). A tensor whose batch dimension has size 1 is the same for every datapoint
(a (1, N, D) encoding) and is passed whole, as it would be at batch 1.
"""

from __future__ import annotations

import copy
from typing import Any, Optional

import torch

from debuggers.batch_dims import BatchDims
from debuggers.tensor_utils import batch_size_of, describe, iter_tensors, select_datapoint
from utils.ops import idx_list


class NotSliceableError(ValueError):
    """What a layer gave cannot be cut into datapoints without a guess."""


def datapoint_batch_size(datapoint: dict[str, Any]) -> int:
    """The number of datapoints in a collated batch: its ``meta_info['idx']``, else its first input tensor."""
    meta = datapoint.get("meta_info")
    if isinstance(meta, dict) and "idx" in meta:
        return len(idx_list(meta["idx"]))
    return batch_size_of(datapoint)


def datapoint_slice(datapoint: dict[str, Any], i: int, batch_size: int) -> dict[str, Any]:
    """Datapoint ``i`` of a collated batch as a batch of one: (B, ...) tensors become (1, ...) and the lists of
    ``meta_info`` (one entry per datapoint, as ``collate_datapoints`` makes them) one-entry lists."""
    alone = {key: select_datapoint(value, i, batch_size) for key, value in datapoint.items() if key != "meta_info"}
    if "meta_info" in datapoint:
        alone["meta_info"] = {key: [value[i]] if isinstance(value, list) and len(value) == batch_size
                              else select_datapoint(value, i, batch_size)
                              for key, value in datapoint["meta_info"].items()}
    return alone


class HookedCall:
    """A forward hook's ``(input, output)`` for a whole batch, and each datapoint's slice of it.

    ``dims`` None: every tensor is batch first. The batch size is the largest size of the input's tensors
    along their batch dimension (the batch comes into the layer), else of the output's.
    Every tensor must have that size, or 1, there (or have no such dimension): anything else (Swin's
    (windows x B, ...) attention) cannot be cut into datapoints, and ``NotSliceableError`` says so.
    """

    def __init__(self, layer_name: str, input: Any, output: Any, dims: Optional[BatchDims]) -> None:
        self.layer_name, self.input, self.output = layer_name, input, output
        outputs = list(iter_tensors(output))
        self._output_dims = dims.of_outputs(layer_name, len(outputs)) if dims else [0] * len(outputs)
        self._input_dim = dims.of_inputs(layer_name) if dims else 0
        inputs = [("input tensor", t, self._input_dim) for t in iter_tensors(input)]
        placed = [(f"output tensor {k}", t, d) for k, (t, d) in enumerate(zip(outputs, self._output_dims))] + inputs
        self.batch_size = _largest_batch(inputs) if _largest_batch(inputs) > 1 else _largest_batch(placed)
        for where, tensor, dim in placed if self.batch_size > 1 else []:
            if tensor.ndim > dim and tensor.shape[dim] not in (1, self.batch_size):
                raise NotSliceableError(
                    f"layer '{layer_name}' {where} is {describe(tensor)}, whose dimension {dim} (its batch "
                    f"dimension) is neither the batch ({self.batch_size}) nor 1, so it cannot be cut into "
                    "datapoints; declare batch_mode = 'batched' on the debugger's class if process_forward "
                    "returns batch-first outputs (Lantern then splits them by the batch contract)")

    def alone(self, i: int) -> tuple[Any, Any]:
        """``(input, output)`` of datapoint ``i``, as a batch of one."""
        if self.batch_size == 1:
            return self.input, self.output
        dims = iter(self._output_dims)
        output = _sliced(self.output, lambda: next(dims), i, self.batch_size)
        return _sliced(self.input, lambda: self._input_dim, i, self.batch_size), output


def _largest_batch(placed: list[tuple[str, torch.Tensor, int]]) -> int:
    return max((int(t.shape[d]) for _, t, d in placed if t.ndim > d), default=1)


def _sliced(value: Any, next_dim: Any, i: int, batch_size: int) -> Any:
    """``value`` with every tensor cut to datapoint ``i`` along its batch dimension (``next_dim()``, in
    ``iter_tensors`` order); containers rebuilt as the same type."""
    if isinstance(value, torch.Tensor):
        dim = next_dim()
        return value.narrow(dim, i, 1) if value.ndim > dim and value.shape[dim] == batch_size else value
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_sliced(item, next_dim, i, batch_size) for item in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_sliced(item, next_dim, i, batch_size) for item in value)
    if isinstance(value, dict):
        sliced = copy.copy(value)  # keeps a dict subclass (a Hugging Face ModelOutput) what it is
        for key, item in value.items():
            sliced[key] = _sliced(item, next_dim, i, batch_size)
        return sliced
    return value

