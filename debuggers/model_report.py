"""The run-level model report: parameters per layer, FLOPs, shapes and dtypes of one forward pass, conv filters.

Written once per run as ``work_dir/model_report.json`` (when a debugger is
configured) so that the viewer can show where a model's size and compute go
next to the per-datapoint debug outputs; its conv filters are rewritten at each
checkpoint epoch (``refresh_conv_filters``), so the viewer shows the trained ones.
"""

from __future__ import annotations

import json
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from debuggers.model_runs import eval_mode
from debuggers.outputs import ROOT_MODULE_NAME
from debuggers.tensor_utils import iter_tensors
from utils.atomic_files import atomic_write_json

MAX_FILTER_LAYERS = 4  # the first Conv2d layers whose filters the report keeps
MAX_FILTERS = 16  # per layer, as the PyTorch chapter's 4 x 4 grid


def build_model_report(model: torch.nn.Module, example_inputs: Any) -> dict[str, Any]:
    """Parameter counts per layer and in total, FLOPs of ``model(example_inputs)`` per module, the input and output
    shapes and dtypes of every module in that forward pass (``module_shapes``, in the order the modules finish; the
    module a failing forward stopped in as ``failed_module``, with its inputs' shapes), and the first conv layers'
    filters (``conv_filters``).

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
    recorder = ShapeRecorder(model)
    with recorder:
        report.update(_count_flops(model, example_inputs))
    report["module_shapes"] = recorder.modules()
    if recorder.failed is not None:
        report["failed_module"] = recorder.failed
    counted = report["total_flops"] is not None
    shapes = {entry["name"]: entry for entry in report["module_shapes"]}
    for layer in layers:  # layers of element-wise ops only (norms, activations) count 0
        layer["flops"] = report["module_flops"].get(layer["name"], 0) if counted else None
        ran = shapes.get(layer["name"], {})
        layer["output_shape"] = (ran.get("output_shapes") or [None])[0]
        layer["output_dtype"] = (ran.get("output_dtypes") or [None])[0]
    report.update(conv_filters(model, "start-up"))
    return report


class ShapeRecorder:
    """While entered, hooks every module of ``model`` and records, for its first call, the shapes of its input
    tensors (positional and keyword) and the shapes and dtypes of its output tensors; ``calls`` counts all of them.
    ``failed``: the innermost module a raising forward was inside, with its inputs (where a shape mismatch is)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self._entries: dict[str, dict[str, Any]] = {}
        self._inside: list[tuple[str, torch.nn.Module, list[list[int]]]] = []
        self._handles: list[Any] = []
        self.failed: dict[str, Any] | None = None

    def __enter__(self) -> ShapeRecorder:
        for name, module in self.model.named_modules():
            name = name or ROOT_MODULE_NAME
            self._handles.append(module.register_forward_pre_hook(
                lambda m, args, kwargs, name=name: self._enter(name, m, (args, kwargs)), with_kwargs=True))
            self._handles.append(module.register_forward_hook(lambda m, args, output, name=name: self._leave(
                name, m, output)))
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        if self._inside:  # the forward raised inside these modules
            name, module, inputs = self._inside[-1]
            self.failed = {"name": name, "type": type(module).__name__, "module": module.extra_repr(),
                           "input_shapes": inputs}

    def _enter(self, name: str, module: torch.nn.Module, inputs: Any) -> None:
        self._inside.append((name, module, [list(t.shape) for t in iter_tensors(inputs)]))

    def _leave(self, name: str, module: torch.nn.Module, output: Any) -> None:
        _, _, inputs = self._inside.pop()
        entry = self._entries.get(name)
        if entry is None:
            tensors = list(iter_tensors(output))
            self._entries[name] = {"name": name, "type": type(module).__name__, "input_shapes": inputs,
                                   "output_shapes": [list(t.shape) for t in tensors],
                                   "output_dtypes": [str(t.dtype).removeprefix("torch.") for t in tensors],
                                   "calls": 1}
        else:
            entry["calls"] += 1

    def modules(self) -> list[dict[str, Any]]:
        """Every module that ran, in the order their first calls finished."""
        return list(self._entries.values())


def conv_filters(model: torch.nn.Module, taken_at: str) -> dict[str, Any]:
    """``{'conv_filters': [...], 'conv_filters_at': taken_at}``: the first ``MAX_FILTERS`` filters of the first
    ``MAX_FILTER_LAYERS`` ``Conv2d`` layers, as the PyTorch chapter draws them: (n, 3, kh, kw) where the layer
    reads 3 channels (an RGB picture each), else input channel 0, (n, kh, kw)."""
    layers = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Conv2d) and len(layers) < MAX_FILTER_LAYERS:
            weight = module.weight.detach()[:MAX_FILTERS].float().cpu()
            rgb = weight.shape[1] == 3
            layers.append({"layer": name, "weight_shape": list(module.weight.shape), "rgb": rgb,
                           "filters": (weight if rgb else weight[:, 0]).tolist()})
    return {"conv_filters": layers, "conv_filters_at": taken_at}


def refresh_conv_filters(path: str, model: torch.nn.Module, taken_at: str) -> None:
    """Rewrite the conv filters of the report at ``path`` (the run's own) with ``model``'s, e.g. after an epoch."""
    with open(path) as f:
        report = json.load(f)
    report.update(conv_filters(model, taken_at))
    write_model_report(path, report)


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
