"""What each ready-made debugger costs per validation datapoint, on both demo models.

    python -m benchmarks.debugger_capture_cost [--datapoints 256] [--batch-size 32] [--repeats 5] [--threads 1]

For each model the same evaluation loop (``torch.no_grad()``, forward, then the
debugger) runs without a debugger and with each debugger alone, pages written
to a temporary folder; runs are interleaved and the best of ``--repeats`` is
kept (load from other processes only ever adds time). Prints ms per datapoint and the
ratio to the loop without a debugger.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from typing import Any, Optional

import torch

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
    with torch.no_grad():
        for batch in batches:
            dp = dict(batch)
            dp["outputs"] = model(dp["inputs"])
            if debugger is not None:
                debugger(dp, model)
    if debugger is not None:
        debugger.save_all(folder.name)
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


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datapoints", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (1 gives stable numbers on a machine shared with other work)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    dataset = SyntheticShapesDataset(num_datapoints=args.datapoints, split="val")
    batches = [collate_datapoints([dataset[i] for i in range(s, min(s + args.batch_size, args.datapoints))])
               for s in range(0, args.datapoints, args.batch_size)]
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
