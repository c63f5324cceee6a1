"""What each ready-made debugger costs per validation datapoint, on both demo models.

    python -m benchmarks.debugger_capture_cost [--datapoints 256] [--batch-size 32] [--repeats 5] [--threads 1]
    python -m benchmarks.debugger_capture_cost --gradcam [--datapoints 2000] [--batch-size 64] [--threads 1]

For each model the same evaluation loop (``torch.no_grad()``, forward, then the
debugger) runs without a debugger and with each debugger alone, pages written
to a temporary folder; runs are interleaved and the best of ``--repeats`` is
kept (load from other processes only ever adds time). Prints ms per datapoint and the
ratio to the loop without a debugger.

``--gradcam`` instead measures Grad-CAM of every datapoint side by side, in interleaved
rounds (medians): the loop without capture, the hand-written floor (the evaluation
forward itself with gradients on, a hook, one ``autograd.grad`` per batch, ``numpy.save``),
captum's ``LayerGradCam`` + ``numpy.save``, and Lantern's ``GradCAMDebugger`` with its pages,
with the minor page faults of each.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F

from benchmarks.common import run_loop
from data.datasets import SyntheticShapesDataset, collate_datapoints
from debuggers.activation_stats_debugger import ActivationStatsDebugger
from debuggers.attention_debugger import AttentionDebugger
from debuggers.capture_debugger import CaptureDebugger
from debuggers.feature_map_debugger import FeatureMapDebugger
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.gradient_flow_debugger import GradientFlowDebugger
from debuggers.layer_output_debugger import LayerOutputDebugger
from debuggers.nan_inf_debugger import NaNInfDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from models import AttentionClassifier, SmallCNN

Debuggers = dict[str, Optional[dict[str, Any]]]

CNN_DEBUGGERS: Debuggers = {
    "none": None,
    "FeatureMapDebugger(layer4)": {"class": FeatureMapDebugger, "args": {"layer_name": "backbone.layer4"}},
    "ActivationStatsDebugger(layer3)": {"class": ActivationStatsDebugger, "args": {"layer_name": "backbone.layer3"}},
    "LayerOutputDebugger(layer1)": {"class": LayerOutputDebugger, "args": {"layer_name": "backbone.layer1"}},
    "GradCAMDebugger(layer4)": {"class": GradCAMDebugger, "args": {"target_layer": "backbone.layer4"}},
    "NaNInfDebugger": {"class": NaNInfDebugger, "args": {}},
    "GradientFlowDebugger": {"class": GradientFlowDebugger, "args": {}},
}
ATTENTION_DEBUGGERS: Debuggers = {
    "none": None,
    "AttentionDebugger(blocks.1.attn)": {"class": AttentionDebugger, "args": {"layer_name": "blocks.1.attn"}},
    "CaptureDebugger(all states)": {"class": CaptureDebugger, "args": {}},
    "FeatureMapDebugger(patch_embed)": {"class": FeatureMapDebugger, "args": {"layer_name": "patch_embed"}},
    "ActivationStatsDebugger(blocks.1.mlp)": {"class": ActivationStatsDebugger,
                                              "args": {"layer_name": "blocks.1.mlp"}},
    "GradCAMDebugger(patch_embed)": {"class": GradCAMDebugger, "args": {"target_layer": "patch_embed"}},
    "NaNInfDebugger": {"class": NaNInfDebugger, "args": {}},
    "GradientFlowDebugger": {"class": GradientFlowDebugger, "args": {}},
}


def eval_loop(model: torch.nn.Module, batches: list[dict], debugger_config: Optional[dict]) -> float:
    """Seconds for one pass over ``batches``, with pages written and flushed when a debugger is given."""
    debugger = None
    folder = tempfile.TemporaryDirectory(prefix="lantern-bench-")
    if debugger_config is not None:
        debugger = SequentialDebugger([{"name": "d", "debugger_config": debugger_config}], page_size_mb=16,
                                      model=model)
        debugger.reset_buffer(folder.name)
        debugger.enabled = True
    start = time.perf_counter()
    run_loop(model, batches, debugger)
    elapsed = time.perf_counter() - start
    if debugger is not None:
        debugger.close()
    folder.cleanup()
    return elapsed


def measure(model: torch.nn.Module, batches: list[dict], debuggers: Debuggers, repeats: int) -> dict[str, float]:
    """Best seconds of the repeats per debugger (other load only adds), runs interleaved."""
    eval_loop(model, batches[:1], None)  # warm-up
    times: dict[str, list[float]] = {name: [] for name in debuggers}
    for _ in range(repeats):
        for name, config in debuggers.items():
            times[name].append(eval_loop(model, batches, config))
    return {name: min(values) for name, values in times.items()}


def print_table(title: str, seconds: dict[str, float], datapoints: int) -> None:
    base = seconds["none"]
    print(f"\n{title}: {datapoints} datapoints")
    print(f"| {'debugger':<40} | {'ms / datapoint':>14} | {'ratio':>6} |")
    print(f"| {'-' * 40} | {'-' * 14}:| {'-' * 6}:|")
    for name, value in seconds.items():
        print(f"| {name:<40} | {1000 * value / datapoints:>14.3f} | {value / base:>6.2f} |")


# ------------------------------------------------- Grad-CAM side by side with captum
def _cam_of(activations: torch.Tensor, gradients: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Grad-CAM from A and dy/dA, upsampled and divided by its max: what every workload below saves."""
    cam = F.relu((gradients.mean(dim=(2, 3), keepdim=True) * activations).sum(1, keepdim=True))
    cam = F.interpolate(cam, size=size, mode="bilinear", align_corners=False)[:, 0]
    return cam / cam.amax(dim=(1, 2), keepdim=True).clamp(min=1e-12)


def gradcam_floor(model: torch.nn.Module, batches: list[dict], folder: str) -> None:
    """Hand-written: the evaluation forward itself with gradients on and a hook keeping A, one
    ``autograd.grad`` per batch, ``numpy.save`` per batch."""
    layer, kept = model.backbone.layer4, []
    handle = layer.register_forward_hook(lambda module, args, output: kept.append(output))
    for n, batch in enumerate(batches):
        kept.clear()
        with torch.enable_grad():
            logits = model(batch["inputs"])["logits"]
            (grads,) = torch.autograd.grad(logits.gather(1, logits.argmax(1, keepdim=True)).sum(), kept[-1])
        np.save(os.path.join(folder, f"{n}.npy"), _cam_of(kept[-1].detach(), grads, (32, 32)).numpy())
    handle.remove()


def gradcam_captum(model: torch.nn.Module, batches: list[dict], folder: str) -> None:
    """captum's LayerGradCam after the evaluation forward, upsampled, numpy.save per batch."""
    from captum.attr import LayerAttribution, LayerGradCam

    gradcam = LayerGradCam(lambda image: model({"image": image})["logits"], model.backbone.layer4)
    for n, batch in enumerate(batches):
        with torch.no_grad():
            targets = model(batch["inputs"])["logits"].argmax(1)
        cam = gradcam.attribute(batch["inputs"]["image"], target=targets, relu_attributions=True)
        cam = LayerAttribution.interpolate(cam, (32, 32), "bilinear")[:, 0].detach()
        np.save(os.path.join(folder, f"{n}.npy"), (cam / cam.amax(dim=(1, 2), keepdim=True).clamp(min=1e-12)).numpy())


def gradcam_lantern(model: torch.nn.Module, batches: list[dict], folder: str) -> None:
    debugger = SequentialDebugger([{"name": "cam", "debugger_config": CNN_DEBUGGERS["GradCAMDebugger(layer4)"]}],
                                  page_size_mb=16, model=model)
    debugger.reset_buffer(folder)
    debugger.enabled = True
    for batch in batches:
        with torch.no_grad():
            dp = dict(batch)
            dp["outputs"] = model(dp["inputs"])
            debugger(dp, model)
    debugger.save_all(folder)
    debugger.close()


def gradcam_none(model: torch.nn.Module, batches: list[dict], folder: str) -> None:
    with torch.no_grad():
        for batch in batches:
            model(batch["inputs"])


GRADCAM_WORKLOADS: dict[str, Callable[[torch.nn.Module, list[dict], str], None]] = {
    "no capture": gradcam_none, "hand-written floor": gradcam_floor, "captum LayerGradCam + save": gradcam_captum,
    "Lantern GradCAMDebugger": gradcam_lantern}


def gradcam_side_by_side(model: torch.nn.Module, batches: list[dict], rounds: int) -> dict[str, tuple[float, float]]:
    """Median seconds and minor page faults of each workload, interleaved rounds."""
    seconds: dict[str, list[float]] = {name: [] for name in GRADCAM_WORKLOADS}
    faults: dict[str, list[int]] = {name: [] for name in GRADCAM_WORKLOADS}
    for _ in range(rounds + 1):  # the first round warms up and is dropped
        for name, workload in GRADCAM_WORKLOADS.items():
            with tempfile.TemporaryDirectory(prefix="lantern-bench-") as folder:
                minflt, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
                workload(model, batches, folder)
                seconds[name].append(time.perf_counter() - start)
                faults[name].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - minflt)
    return {name: (statistics.median(seconds[name][1:]), statistics.median(faults[name][1:])) for name in seconds}


def print_gradcam_table(results: dict[str, tuple[float, float]], datapoints: int) -> None:
    base, captum = results["no capture"][0], results["captum LayerGradCam + save"][0]
    print(f"\nGrad-CAM of every datapoint (SmallCNN backbone.layer4, 32 px): {datapoints} datapoints, medians")
    print(f"| {'workload':<28} | {'ms / datapoint':>14} | {'ratio to none':>13} | {'ratio to captum':>15} "
          f"| {'minor faults':>12} |")
    print(f"| {'-' * 28} | {'-' * 14}:| {'-' * 13}:| {'-' * 15}:| {'-' * 12}:|")
    for name, (value, faults) in results.items():
        print(f"| {name:<28} | {1000 * value / datapoints:>14.3f} | {value / base:>13.2f} | {value / captum:>15.2f} "
              f"| {faults:>12.0f} |")


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datapoints", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--gradcam", action="store_true", help="Grad-CAM against captum and the floor")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (1 gives stable numbers on a machine shared with other work)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    dataset = SyntheticShapesDataset(num_datapoints=args.datapoints, split="val")
    batches = [collate_datapoints([dataset[i] for i in range(s, min(s + args.batch_size, args.datapoints))])
               for s in range(0, args.datapoints, args.batch_size)]
    if args.gradcam:
        torch.manual_seed(0)
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch size {args.batch_size}")
        print_gradcam_table(gradcam_side_by_side(SmallCNN().eval(), batches, args.repeats), args.datapoints)
        return
    models: list[tuple[str, Callable[[], torch.nn.Module], Debuggers]] = [
        ("SmallCNN", SmallCNN, CNN_DEBUGGERS), ("AttentionClassifier", AttentionClassifier, ATTENTION_DEBUGGERS)]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch size {args.batch_size}, "
          f"best of {args.repeats}")
    for title, build, debuggers in models:
        torch.manual_seed(0)
        model = build().eval()
        print_table(title, measure(model, batches, debuggers, args.repeats), args.datapoints)


if __name__ == "__main__":
    main()
