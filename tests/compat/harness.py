"""The compatibility suite's harness: real SequentialDebugger epochs read back through the public API,
"batched equals alone", and a debugger a user would write."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from debuggers.forward_debugger import ForwardDebugger
from debuggers.model_report import build_model_report
from tests.debuggers.library import entry, run_batches
from utils.builders import build_from_config

__all__ = ["ChannelEnergy", "alone", "assert_same_outputs", "capture", "check_flops", "entry"]


class ChannelEnergy(ForwardDebugger):
    """What a user writes: the mean square of each channel (dimension 1) of a layer, per datapoint."""

    def process_forward(self, module: torch.nn.Module, input: Any, output: Any) -> dict:
        values = output.detach().float()
        return {"energy": values.pow(2).reshape(*values.shape[:2], -1).mean(-1)}

    def summary(self, output: dict) -> dict[str, float]:
        return {"total_energy": float(output["energy"].sum())}


def capture(model: torch.nn.Module, batches: list[dict], out_dir, debuggers: list[dict]) -> dict[int, dict]:
    """One evaluation epoch over ``batches``; every datapoint's outputs as read back from its pages."""
    summary, outputs = run_batches(model, batches, out_dir, debuggers, strict=True)
    idx = [int(i) for batch in batches for i in batch["meta_info"]["idx"]]
    assert summary["datapoints"] == len(idx)
    outputs = {i: outputs[i] for i in idx}
    for config in debuggers:  # every summary works on what the pages hold
        debugger = build_from_config(config["debugger_config"])
        for i in idx:
            values = debugger.summary(outputs[i][config["name"]])
            assert all(isinstance(value, float) for value in values.values()), (config["name"], values)
    return outputs


def check_flops(model: torch.nn.Module, inputs: dict) -> None:
    """The model report's FLOPs against flop_counter on a path it counts (gradients on: no fused fast path;
    unfused attention: matmuls, where the CPU's fused kernel would count 0)."""
    reference = FlopCounterMode(display=False)
    with torch.enable_grad(), reference, sdpa_kernel(SDPBackend.MATH):
        model(inputs)
    assert build_model_report(model, inputs)["total_flops"] == reference.get_total_flops() > 0


def alone(batches: list[dict]) -> list[dict]:
    """Each datapoint as a batch of its own; padded token sequences (left or right) cropped to their real tokens,
    ``decoder_*`` ones by ``decoder_attention_mask``, the others by ``attention_mask``."""
    singles = []
    for batch in batches:
        for row in range(len(batch["meta_info"]["idx"])):
            single = _take(batch, row, None)
            single["inputs"] = {key: _take(value, row, _real(batch["inputs"], key, row))
                                for key, value in batch["inputs"].items()}
            singles.append(single)
    return singles


def _real(inputs: dict, key: str, row: int) -> torch.Tensor | None:
    mask = inputs.get("decoder_attention_mask" if key.startswith("decoder_") else "attention_mask")
    return mask[row] != 0 if mask is not None else None


def _take(value: Any, row: int, real: torch.Tensor | None) -> Any:
    if isinstance(value, dict):
        return {key: _take(item, row, real) for key, item in value.items()}
    if isinstance(value, torch.Tensor) and value.ndim >= 1:
        one = value[row:row + 1]
        return one[:, real] if real is not None and one.ndim == 2 else one
    return value


def assert_same_outputs(batched: dict[int, dict], single: dict[int, dict], rtol: float = 1e-4,
                        atol: float = 1e-5) -> None:
    """Every datapoint's outputs equal, whether it came in a batch or alone (floats to rounding)."""
    assert batched.keys() == single.keys()
    for idx in batched:
        _assert_same(batched[idx], single[idx], f"datapoint {idx}", rtol, atol)


def _assert_same(a: Any, b: Any, where: str, rtol: float, atol: float) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: keys {list(a)} != {list(b)}"
        for key in a:
            _assert_same(a[key], b[key], f"{where}.{key}", rtol, atol)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{where}: {len(a)} != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}[{i}]", rtol, atol)
    elif isinstance(a, (np.ndarray, float, np.floating)) and not isinstance(a, bool):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, f"{where}: shape {a.shape} != {b.shape}"
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=where)
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"
