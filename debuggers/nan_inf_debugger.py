"""``NaNInfDebugger``: which module first produced a NaN or Inf, for each datapoint."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from debuggers.base_debugger import BaseDebugger, Removable
from debuggers.outputs import KIND_NAN_ORIGIN, ROOT_MODULE_NAME, PerDatapoint, not_run_output
from debuggers.tensor_utils import batch_size_of, iter_tensors


@dataclass
class _BadCall:
    """One module call whose output held a NaN/Inf: which rows, and its inputs' row extrema."""

    name: str
    module_type: str
    bad_rows: list[torch.Tensor]  # one (rows,) bool per non-finite output tensor
    input_extrema: list[tuple[torch.Tensor, torch.Tensor]]  # (row min, row max) per floating input


class NaNInfDebugger(BaseDebugger):
    """Hooks every module and names, per datapoint, the first one whose output is not finite.

    Modules are checked in the order their forward passes *finish*, so a module
    is blamed before the parents that contain it. An output tensor is checked per
    datapoint when its first dimension is the batch; a tensor without the batch
    first (e.g. ``(L, B, E)``) that holds a NaN marks every datapoint of the batch.
    Outputs may be tensors, tuples, lists, dicts or None. The common case, every
    output finite, costs one ``isfinite().all()`` per module output.

    Output ``{'kind': 'nan_origin', 'first_module': PerDatapoint[name or None],
    'module_type': PerDatapoint[type or None], 'input_min', 'input_max': (B,)`` (that
    module's input range for the datapoint, nan when no module failed)``,
    'bad_modules': PerDatapoint[[names in order]], 'modules_checked': int}``.
    """

    def __init__(self) -> None:
        self._calls: list[_BadCall] = []
        self._modules_checked = 0

    def attach(self, model: torch.nn.Module) -> list[Removable]:
        return [module.register_forward_hook(self._hook(name or ROOT_MODULE_NAME), with_kwargs=True)
                for name, module in model.named_modules()]

    def _hook(self, name: str) -> Callable[..., None]:
        def check(module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            self._modules_checked += 1
            bad = [rows for t in _floating(output) if not _surely_finite(t) and (rows := _bad_rows(t)).any()]
            if bad:
                extrema = [_row_extrema(t) for t in _floating((args, kwargs)) if t.numel() > 0]
                self._calls.append(_BadCall(name, type(module).__name__, bad, extrema))
        return check

    def __call__(self, datapoint: dict[str, Any], model: torch.nn.Module) -> dict[str, Any]:
        if self._modules_checked == 0:
            return not_run_output("the model did not run while NaNInfDebugger was attached")
        batch = batch_size_of(datapoint)
        first: list[_BadCall | None] = [None] * batch
        bad_modules: list[list[str]] = [[] for _ in range(batch)]
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
            "input_min": torch.tensor([low for low, _ in extrema], dtype=torch.float64),
            "input_max": torch.tensor([high for _, high in extrema], dtype=torch.float64),
            "bad_modules": PerDatapoint(bad_modules),
            "modules_checked": self._modules_checked,
        }

    def clear(self) -> None:
        self._calls, self._modules_checked = [], 0


def _floating(value: Any) -> list[torch.Tensor]:
    return [t for t in iter_tensors(value) if t.is_floating_point() or t.is_complex()]


def _surely_finite(tensor: torch.Tensor) -> bool:
    """One reduction, no temporary: a NaN or Inf makes the sum non-finite (a finite sum can still
    overflow, so a non-finite sum only sends the tensor to the exact check)."""
    return bool(torch.isfinite(tensor.detach().sum()))


def _bad_rows(tensor: torch.Tensor) -> torch.Tensor:
    """(rows,) bool: which rows along the first dimension hold a NaN or Inf (a 0-d tensor is one row)."""
    rows = tensor.detach().reshape(tensor.shape[0] if tensor.ndim else 1, -1)
    return (~torch.isfinite(rows)).any(dim=1).cpu()


def _row_extrema(tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    values = tensor.detach().real if tensor.is_complex() else tensor.detach()
    rows = values.reshape(values.shape[0] if values.ndim else 1, -1).double()
    return rows.amin(dim=1).cpu(), rows.amax(dim=1).cpu()


def _rows_of(bad_rows: list[torch.Tensor], batch: int) -> list[int]:
    """Datapoints hit by one call: per row when a tensor has the batch first, all of them otherwise."""
    hit = torch.zeros(batch, dtype=torch.bool)
    for rows in bad_rows:
        hit |= rows if rows.shape[0] == batch else rows.any()
    return hit.nonzero().flatten().tolist()


def _input_range(call: _BadCall | None, i: int, batch: int) -> tuple[float, float]:
    """Min and max over a call's floating inputs for datapoint ``i`` (whole tensors without the batch first)."""
    if call is None or not call.input_extrema:
        return math.nan, math.nan
    lows = [low[i] if low.shape[0] == batch else low.min() for low, _ in call.input_extrema]
    highs = [high[i] if high.shape[0] == batch else high.max() for _, high in call.input_extrema]
    return float(torch.stack(lows).min()), float(torch.stack(highs).max())
