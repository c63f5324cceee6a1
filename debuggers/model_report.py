"""The run-level model report: parameters per layer and FLOPs of one forward pass.

Written once per run as ``work_dir/model_report.json`` (when a debugger is
configured) so that the viewer can show where a model's size and compute go
next to the per-datapoint debug outputs.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from debuggers.model_runs import eval_mode
from debuggers.outputs import ROOT_MODULE_NAME
from debuggers.tensor_utils import iter_tensors
from utils.atomic_files import atomic_write_json

MODEL_REPORT_FILE = "model_report.json"


def build_model_report(model: torch.nn.Module, example_inputs: Any) -> dict[str, Any]:
    """Parameter counts per layer and in total, and FLOPs of ``model(example_inputs)`` per module.

    FLOPs are counted by ``torch.utils.flop_counter.FlopCounterMode`` (matmuls and
    convolutions; element-wise ops count zero) for the example batch, in eval mode
    and without gradients, with PyTorch's native attention fast path switched off
    (``nn.MultiheadAttention`` and ``nn.Transformer*`` layers would otherwise run one
    fused kernel the counter does not see, and count 0), and with the CPU's fused
    ``scaled_dot_product_attention`` kernel (which Hugging Face models call without
    gradients) counted as the two matmuls it fuses, as the counter does on a GPU; a
    model it cannot trace gets ``total_flops: None`` and the reason in ``flops_error``.
    """
    layers = [_layer_entry(name, module) for name, module in model.named_modules()
              if any(True for _ in module.parameters(recurse=False))]
    unique = {id(p): p for p in model.parameters()}.values()
    trainable = sum(p.numel() for p in unique if p.requires_grad)
    total = sum(p.numel() for p in unique)
    report = {
        "model": type(model).__name__,
        "parameters": {"total": total, "trainable": trainable, "frozen": total - trainable},
        "layers": layers,
        "input_shapes": [list(t.shape) for t in iter_tensors(example_inputs)],
        "batch_size": next((int(t.shape[0]) for t in iter_tensors(example_inputs) if t.ndim), None),
    }
    report.update(_count_flops(model, example_inputs))
    counted = report["total_flops"] is not None
    for layer in layers:  # layers of element-wise ops only (norms, activations) count 0
        layer["flops"] = report["module_flops"].get(layer["name"], 0) if counted else None
    return report


def _layer_entry(name: str, module: torch.nn.Module) -> dict[str, Any]:
    params = list(module.parameters(recurse=False))
    trainable = sum(p.numel() for p in params if p.requires_grad)
    total = sum(p.numel() for p in params)
    return {"name": name or ROOT_MODULE_NAME, "type": type(module).__name__, "parameters": total,
            "trainable": trainable, "frozen": total - trainable}


def _count_flops(model: torch.nn.Module, example_inputs: Any) -> dict[str, Any]:
    """``total_flops`` and ``module_flops`` {module name: FLOPs including its children}."""
    counter = FlopCounterMode(display=False, custom_mapping={
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_attention_flops})
    fast_path = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with eval_mode(model), torch.no_grad(), counter:
            model(example_inputs)
    except Exception as exc:  # the report is informative only; a model the counter cannot trace still trains
        return {"total_flops": None, "module_flops": {}, "flops_error": f"{type(exc).__name__}: {exc}"}
    finally:
        torch.backends.mha.set_fastpath_enabled(fast_path)
    prefix = type(model).__name__
    module_flops = {}
    for key, per_op in counter.get_flop_counts().items():
        if key == "Global":
            continue
        name = ROOT_MODULE_NAME if key == prefix else key.removeprefix(prefix + ".")
        module_flops[name] = int(sum(per_op.values()))
    return {"total_flops": int(counter.get_total_flops()), "module_flops": module_flops}


def write_model_report(path: str, report: dict[str, Any]) -> None:
    """Write the report as JSON, atomically (a reader never sees half of it)."""
    atomic_write_json(path, report)


def _cpu_attention_flops(query_shape: torch.Size, key_shape: torch.Size, value_shape: torch.Size, *args: Any,
                         **kwargs: Any) -> int:
    """FLOPs of ``aten._scaled_dot_product_flash_attention_for_cpu``: its two matmuls, which the counter has no
    formula for (it has them for the GPU's kernels)."""
    return sdpa_flop_count(query_shape, key_shape, value_shape)
