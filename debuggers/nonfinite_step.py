"""Where a training step's NaN/Inf came from: the batch's inputs, the first layer whose output went
non-finite (``NaNInfDebugger`` rerun on the step's batch), or the backward pass (layers whose gradient holds
NaN/Inf while every output is finite).

The rerun is the step's forward pass again, in training mode, without gradients, with the RNG forked and the
model's buffers (BatchNorm statistics) put back afterwards: training goes on exactly as if it had not run.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from debuggers.layer_norms import ModelLayers
from debuggers.nan_inf_debugger import NaNInfDebugger
from debuggers.tensor_utils import iter_tensors
from utils.ops import idx_list

LISTED = 10  # idx and layers a message names before "and N more"


@dataclass
class NonFiniteStep:
    """What is known about one non-finite step."""

    epoch: int
    step: int
    batch_in_epoch: int
    loss: float
    batch_idx: list[int]
    gradient_layers: list[str]  # layers whose gradient holds NaN/Inf
    input_nonfinite_idx: list[int] = field(default_factory=list)
    first_layer: Optional[str] = None
    first_layer_type: Optional[str] = None
    first_layer_idx: list[int] = field(default_factory=list)
    first_layer_input: tuple[float, float] = (math.nan, math.nan)
    origin_error: Optional[str] = None  # why the rerun could not say (it raised)

    def describe(self) -> str:
        """One paragraph: the step, the batch's idx, where the NaN/Inf first appears, and what to try."""
        what = "the loss is " + _number(self.loss) if not math.isfinite(self.loss) else \
            f"the loss is finite ({self.loss:.4g}) but the gradient is not"
        parts = [f"non-finite training step {self.step} (epoch {self.epoch}, batch {self.batch_in_epoch} of the "
                 f"epoch, idx {_listed(self.batch_idx)}): {what}"]
        if self.input_nonfinite_idx:
            parts.append(f"the inputs of idx {_listed(self.input_nonfinite_idx)} already hold NaN/Inf: check the "
                         "dataset")
        if self.first_layer is not None:
            low, high = self.first_layer_input
            parts.append(f"the first layer whose output went non-finite is '{self.first_layer}' "
                         f"({self.first_layer_type}), for idx {_listed(self.first_layer_idx)}; its input ranged "
                         f"[{low:.4g}, {high:.4g}]")
        elif self.origin_error:
            parts.append(f"rerunning the batch to find the first non-finite layer failed ({self.origin_error})")
        elif math.isfinite(self.loss):
            parts.append("every layer's output is finite: the backward pass made the NaN/Inf (sqrt of 0, "
                         "a division by a tiny number, log of 0 masked in the forward)")
        else:
            parts.append("every layer's output is finite: the criterion made the NaN/Inf")
        if self.gradient_layers:
            parts.append(f"layers whose gradient holds NaN/Inf: {_listed(self.gradient_layers)}")
        return "; ".join(parts) + (". Try a lower learning rate, gradient clipping "
                                   "(torch.nn.utils.clip_grad_norm_) or an epsilon where the model divides or "
                                   "takes a log")


def nonfinite_gradient_layers(layers: ModelLayers) -> list[str]:
    """Names of the layers one of whose gradients holds a NaN/Inf (exact: a norm overflowing float32 is not
    one), fetched from the device at once."""
    present = [i for i, p in enumerate(layers.params) if p.grad is not None]
    if not present:
        return []
    device = layers.params[present[0]].grad.device
    flags = torch.stack([(~torch.isfinite(layers.params[i].grad)).any().to(device) for i in present]).tolist()
    bad = {i for i, flag in zip(present, flags) if flag}
    owners = sorted({layer for param, layer in zip(layers.pair_param.tolist(), layers.pair_layer.tolist())
                     if param in bad})
    return [layers.names[layer] for layer in owners]


def find_forward_origin(found: NonFiniteStep, model: torch.nn.Module, datapoint: dict[str, Any]) -> None:
    """Fill ``found``'s inputs check and first layer by rerunning the batch with ``NaNInfDebugger`` hooked."""
    found.input_nonfinite_idx = _nonfinite_input_idx(datapoint, found.batch_idx)
    debugger = NaNInfDebugger()
    handles = debugger.attach(model)
    buffers = [b.detach().clone() for b in model.buffers()]
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    try:
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            model(datapoint["inputs"])
        origin = debugger(datapoint, model)
    except Exception as exc:  # the report must not hide the NaN it reports
        found.origin_error = f"{type(exc).__name__}: {exc}"
        return
    finally:
        for handle in handles:
            handle.remove()
        debugger.clear()
        with torch.no_grad():
            for buffer, saved in zip(model.buffers(), buffers):
                buffer.copy_(saved)
    _take_first_layer(found, origin)


def _take_first_layer(found: NonFiniteStep, origin: dict[str, Any]) -> None:
    """The earliest failing module call over the batch, and the datapoints it failed for."""
    order = origin["first_module_index"]
    if not bool(torch.isfinite(order).any()):
        return
    first = int(torch.nan_to_num(order, nan=math.inf).argmin())
    found.first_layer = origin["first_module"][first]
    found.first_layer_type = origin["module_type"][first]
    found.first_layer_idx = [found.batch_idx[i] for i in range(len(order)) if order[i] == order[first]
                             and i < len(found.batch_idx)]
    found.first_layer_input = (float(origin["input_min"][first]), float(origin["input_max"][first]))


def _nonfinite_input_idx(datapoint: dict[str, Any], batch_idx: list[int]) -> list[int]:
    """idx of the datapoints whose floating inputs (batch-first tensors) hold a NaN/Inf."""
    bad = torch.zeros(len(batch_idx), dtype=torch.bool)
    for tensor in iter_tensors(datapoint.get("inputs")):
        if (tensor.is_floating_point() or tensor.is_complex()) and tensor.ndim >= 1 \
                and tensor.shape[0] == len(batch_idx):
            bad |= (~torch.isfinite(tensor.detach().reshape(len(batch_idx), -1))).any(dim=1).cpu()
    return [idx for idx, flag in zip(batch_idx, bad.tolist()) if flag]


def batch_idx_of(datapoint: dict[str, Any]) -> list[int]:
    """The batch's ``meta_info['idx']`` (an empty list when the datapoint has none)."""
    with contextlib.suppress(KeyError, TypeError, ValueError):
        return idx_list(datapoint["meta_info"]["idx"])
    return []


def _listed(values: list) -> str:
    shown = ", ".join(repr(v) if isinstance(v, str) else str(v) for v in values[:LISTED])
    return f"[{shown}{f', and {len(values) - LISTED} more' if len(values) > LISTED else ''}]"


def _number(value: float) -> str:
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
