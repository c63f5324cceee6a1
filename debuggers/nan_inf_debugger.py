"""``NaNInfDebugger``: which module first produced a NaN or Inf, for each datapoint."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

import torch

from debuggers.base_debugger import BaseDebugger, Removable
from debuggers.batch_dims import BatchDims, check_declared, describe_unknown
from debuggers.batch_mode import BATCHED
from debuggers.outputs import KIND_NAN_ORIGIN, ROOT_MODULE_NAME, PerDatapoint
from debuggers.tensor_utils import as_tensor, batch_size_of, iter_tensors


@dataclass
class _BadCall:
    """One module call whose output held a NaN/Inf: which rows, and its inputs' row extrema."""

    name: str
    order: int  # how many module calls finished before this one (execution order)
    module_type: str
    bad_rows: list[torch.Tensor]  # one (rows,) bool per non-finite output tensor, along its batch dimension
    layouts: list[tuple[torch.Size, int]]  # their shapes and batch dimensions, to say why one could not be split
    input_extrema: list[tuple[torch.Tensor, torch.Tensor]]  # (row min, row max) per floating input


class NaNInfDebugger(BaseDebugger):
    """Hooks every module and names, per datapoint, the first one whose output is not finite.

    Modules are checked in the order their forward passes *finish*, so a module
    is blamed before the parents that contain it. Each output tensor is checked per
    datapoint along its batch dimension, which is known, not guessed from sizes
    (``debuggers.batch_dims``): sequence-first ``nn.MultiheadAttention``, RNNs and
    transformer layers are recognised by type, other modules are batch first unless
    ``batch_dims={'<module pattern>': dim}`` declares otherwise. A non-finite tensor
    whose batch dimension does not have the batch's size blames no datapoint (it
    cannot say which): ``batch_dim_unknown`` names the module and says why. Outputs may be tensors,
    tuples, lists, dicts or None. The common case, every output finite, costs one
    ``isfinite().all()`` per module output.

    Output ``{'kind': 'nan_origin', 'first_module': PerDatapoint[name or None],
    'module_type': PerDatapoint[type or None], 'first_module_index': (B,)`` (the failing call's index
    in execution order, nan if none)``, 'input_min', 'input_max': (B,)`` (that
    module's input range for the datapoint, nan when no module failed)``,
    'bad_modules': PerDatapoint[[names in order]], 'modules_checked': int,
    'batch_dim_unknown': [why, for each non-finite output that could not be split per datapoint]}``.
    """

    batch_mode = BATCHED  # outputs with the batch first (debuggers/batch_mode.py)

    def __init__(self, batch_dims: Optional[Mapping[str, int]] = None) -> None:
        self.batch_dims = check_declared(batch_dims, "NaNInfDebugger")
        self._calls: list[_BadCall] = []
        self._modules_checked = 0

    def attach(self, model: torch.nn.Module) -> list[Removable]:
        dims = BatchDims(model, self.batch_dims)
        return [module.register_forward_hook(self._hook(name or ROOT_MODULE_NAME, name, dims), with_kwargs=True)
                for name, module in model.named_modules()]

    def _hook(self, name: str, path: str, dims: BatchDims) -> Callable[..., None]:
        def check(module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            self._modules_checked += 1
            tensors = _floating(output)
            if all(_surely_finite(t) for t in tensors):
                return
            bad = [((t.shape, dim), rows) for t, dim in zip(tensors, dims.of_outputs(path, len(tensors)))
                   if (rows := _bad_rows(t, dim)).any()]
            if bad:
                in_dim = dims.of_inputs(path)
                extrema = [_row_extrema(t, in_dim) for t in _floating((args, kwargs)) if t.numel() > 0]
                self._calls.append(_BadCall(name, self._modules_checked - 1, type(module).__name__,
                                            [rows for _, rows in bad], [layout for layout, _ in bad], extrema))
        return check

    def __call__(self, datapoint: dict[str, Any], model: torch.nn.Module) -> dict[str, Any]:
        if self._modules_checked == 0:
            return None
        batch = batch_size_of(datapoint)
        first: list[_BadCall | None] = [None] * batch
        bad_modules: list[list[str]] = [[] for _ in range(batch)]
        unknown = [f"module '{call.name}': output of {describe_unknown(shape, dim, batch)}"
                   for call in self._calls for rows, (shape, dim) in zip(call.bad_rows, call.layouts)
                   if rows.shape[0] != batch]
        for call in self._calls:
            for i in _rows_of(call.bad_rows, batch):
                if call.name not in bad_modules[i]:
                    bad_modules[i].append(call.name)
                first[i] = first[i] or call
        extrema = [_input_range(call, i, batch) for i, call in enumerate(first)]
        return {
            "kind": KIND_NAN_ORIGIN,
            "first_module": PerDatapoint([call.name if call else None for call in first]),
            "module_type": PerDatapoint([call.module_type if call else None for call in first]),
            "first_module_index": torch.tensor([call.order if call else math.nan for call in first],
                                               dtype=torch.float64),
            "input_min": torch.tensor([low for low, _ in extrema], dtype=torch.float64),
            "input_max": torch.tensor([high for _, high in extrema], dtype=torch.float64),
            "bad_modules": PerDatapoint(bad_modules),
            "modules_checked": self._modules_checked,
            "batch_dim_unknown": unknown,
        }

    def summary_columns(self, output: dict[str, Any]) -> dict[str, Any]:
        """Whether a NaN/Inf appeared, where first (index of the module call in execution order, nan if
        none) and in how many modules."""
        first = as_tensor(output["first_module_index"])
        bad = output["bad_modules"]  # one list per datapoint; a datapoint's own list as a batch of one
        return {"has_nan": first.isfinite(), "first_module_index": first,
                "bad_module_count": [len(modules) for modules in bad] if isinstance(bad, PerDatapoint) else [len(bad)]}

    def not_run_reason(self, model: torch.nn.Module) -> Optional[str]:
        return "the model did not run while NaNInfDebugger was attached" if self._modules_checked == 0 else None

    def clear(self) -> None:
        self._calls, self._modules_checked = [], 0


def _floating(value: Any) -> list[torch.Tensor]:
    return [t for t in iter_tensors(value) if t.is_floating_point() or t.is_complex()]


def _surely_finite(tensor: torch.Tensor) -> bool:
    """One reduction, no temporary: a NaN or Inf makes the sum non-finite (a finite sum can still
    overflow, so a non-finite sum only sends the tensor to the exact check)."""
    return bool(torch.isfinite(tensor.detach().sum()))


def _rows(tensor: torch.Tensor, dim: int) -> torch.Tensor:
    """(rows, -1) view of ``tensor`` along dimension ``dim`` (a tensor without it is one row)."""
    tensor = tensor.detach()
    if tensor.ndim <= dim:
        return tensor.reshape(1, -1)
    return tensor.movedim(dim, 0).reshape(tensor.shape[dim], -1)


def _bad_rows(tensor: torch.Tensor, dim: int) -> torch.Tensor:
    """(rows,) bool: which rows along the batch dimension ``dim`` hold a NaN or Inf."""
    return (~torch.isfinite(_rows(tensor, dim))).any(dim=1).cpu()


def _row_extrema(tensor: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    rows = _rows(tensor.real if tensor.is_complex() else tensor, dim).double()
    return rows.amin(dim=1).cpu(), rows.amax(dim=1).cpu()


def _rows_of(bad_rows: list[torch.Tensor], batch: int) -> list[int]:
    """Datapoints hit by one call, per row along the batch dimension (none where that is unknown)."""
    hit = torch.zeros(batch, dtype=torch.bool)
    for rows in bad_rows:
        if rows.shape[0] == batch:
            hit |= rows
    return hit.nonzero().flatten().tolist()


def _input_range(call: _BadCall | None, i: int, batch: int) -> tuple[float, float]:
    """Min and max over a call's floating inputs for datapoint ``i`` (whole tensors without the batch first)."""
    if call is None or not call.input_extrema:
        return math.nan, math.nan
    lows = [low[i] if low.shape[0] == batch else low.min() for low, _ in call.input_extrema]
    highs = [high[i] if high.shape[0] == batch else high.max() for _, high in call.input_extrema]
    return float(torch.stack(lows).min()), float(torch.stack(highs).max())
