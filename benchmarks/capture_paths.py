"""Capture on the path a user calls, beside the runner's: each against no capture and the hand-written floor.

Two paths, side by side in one run:

* **call**: ``SequentialDebugger.__call__`` as the seed's evaluation loop calls it: under ``torch.no_grad()``,
  ``dp['outputs'] = model(dp['inputs'])``, then ``dp['debug'] = debugger(dp, model)`` per batch, the pages
  flushed by ``save_all`` at the end;
* **runner**: a real ``BaseEvaluator``'s ``_eval_step`` per batch (the forward under the stall watchdog, the
  metric, the epoch table's rows, the capture policy's scores), capture started and finished as its ``run``
  does.

On each path three cases over the same cached batches: no capture (on the runner, its debugger configured but
disabled), Lantern, and the floor: a plain forward hook (or capture listener) that ``numpy.save``\\ s each batch,
or captum's ``LayerGradCam`` + ``numpy.save`` for Grad-CAM. Workloads (batch 64 by default, 32 px):

* **features**: ``FeatureMapDebugger('backbone.layer2.conv')`` of ``SmallCNN`` (its stats and summaries too);
  floor: the layer's output saved;
* **layer-outputs**: ``LayerOutputDebugger('backbone.layer2.conv')`` (4x4 average pooling); floor: the same
  pooling in the hook, saved;
* **attention**: ``AttentionDebugger('blocks.1.attn')`` of ``AttentionClassifier``; floor: a capture listener
  saving the weights;
* **gradcam**: ``GradCAMDebugger('backbone.layer4')`` of ``SmallCNN``; peer: captum's ``LayerGradCam`` of the
  predicted class, upsampled to the input, saved.

Every case runs in a new random order each round; a figure is the median over the rounds, "x none" a ratio
to no capture on the same path, "x floor" the median of each round's ratio to the floor on the same path, beside
the middle half of those rounds' ratios (their quartiles): the run's own noise, so a ratio whose middle half holds
1 is within it. Each pass writes into a folder emptied before it, untimed.

    python -m benchmarks.capture_paths [--datapoints 2000] [--batch-size 64] [--rounds 5] [--threads 1]
        [--workloads features layer-outputs attention gradcam] [--cpu-time | --forward-thread]

``--cpu-time`` compares the process's CPU time (every thread, the page writer's too) instead of wall time: on a
machine loaded by other work, wall time mostly measures the load. ``--forward-thread``: the CPU time of the thread
that runs the loop alone (the forward pass, the hooks, the debugger's call; the floor's writes), without the page
writer's thread.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

import torch
import torch.nn.functional as F
from captum.attr import LayerAttribution, LayerGradCam
from torch.utils.data import DataLoader

from benchmarks.common import FloorWriter, floor_listener, interleaved_times
from data.datasets import SyntheticShapesDataset, collate_datapoints
from debuggers.attention_debugger import AttentionDebugger
from debuggers.feature_map_debugger import FeatureMapDebugger
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.layer_output_debugger import LayerOutputDebugger
from debuggers.utils import require_layer
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from metrics import ClassificationMetric
from models import AttentionClassifier, SmallCNN
from runners.evaluators import BaseEvaluator
from runners.hooks import DebuggerHook, EpochTableHook, EvalPass, Hooks
from runners.unique_idx import SeenIdx

PATHS = ("call", "runner")
CASES = ("none", "Lantern", "floor")
Floor = Callable[[torch.nn.Module, str], Any]  # (model, folder) -> a handle whose remove() ends it
AfterBatch = Callable[[torch.nn.Module, dict, FloorWriter], None]  # a floor working on the batch and its outputs


@dataclass
class Workload:
    """A model, the debugger capturing from it and the floor doing the same by hand."""

    model: type
    debugger: dict
    floor: str  # what the floor is, for the table
    hook: Optional[Floor] = None
    after_batch: Optional[AfterBatch] = None
    model_args: dict = field(default_factory=dict)


def saved_output(layer: str, transform: Callable[[torch.Tensor], torch.Tensor] = lambda t: t) -> Floor:
    """A plain forward hook ``numpy.save``-ing ``transform`` of the layer's output of every batch."""
    def attach(model: torch.nn.Module, folder: str) -> Any:
        writer = FloorWriter(folder)
        return require_layer(model, layer).register_forward_hook(
            lambda module, args, output: writer.save(transform(output.detach())))
    return attach


def pooled(output: torch.Tensor) -> torch.Tensor:
    """``LayerOutputDebugger``'s default pooling: 4x4 blocks, a last partial block averaged over what it holds."""
    kernel = [min(4, size) for size in output.shape[2:]]
    return F.avg_pool2d(output, kernel, kernel, ceil_mode=True)


def captum_gradcam(model: torch.nn.Module, dp: dict, writer: FloorWriter) -> None:
    """captum's LayerGradCam of the predicted class after the evaluation forward, upsampled, saved."""
    image = dp["inputs"]["image"]
    gradcam = LayerGradCam(lambda x: model({"image": x})["logits"], model.backbone.layer4)
    cam = gradcam.attribute(image, target=dp["outputs"]["logits"].argmax(1), relu_attributions=True)
    writer.save(LayerAttribution.interpolate(cam, image.shape[-2:], "bilinear")[:, 0])


WORKLOADS = {
    "features": Workload(SmallCNN, {"class": FeatureMapDebugger, "args": {"layer_name": "backbone.layer2.conv"}},
                         "hook + numpy.save", hook=saved_output("backbone.layer2.conv")),
    "layer-outputs": Workload(SmallCNN, {"class": LayerOutputDebugger,
                                         "args": {"layer_name": "backbone.layer2.conv"}},
                              "hook, pooled + numpy.save", hook=saved_output("backbone.layer2.conv", pooled)),
    "attention": Workload(AttentionClassifier, {"class": AttentionDebugger, "args": {"layer_name": "blocks.1.attn"}},
                          "listener + numpy.save",
                          hook=lambda model, folder: floor_listener("blocks.1.attn", "attention_weights", folder)),
    "gradcam": Workload(SmallCNN, {"class": GradCAMDebugger, "args": {"target_layer": "backbone.layer4"}},
                        "captum LayerGradCam + numpy.save", after_batch=captum_gradcam),
}


class PathCases:
    """The cases of one workload on both paths, each a callable running one whole pass into a fresh folder."""

    def __init__(self, workload: Workload, root: str, args: argparse.Namespace) -> None:
        self.workload, self.folder = workload, os.path.join(root, "out")
        self.evaluator = BaseEvaluator({
            "runner": BaseEvaluator, "work_dir": os.path.join(root, "work"), "seed": 0,
            "eval_dataset": {"class": SyntheticShapesDataset,
                             "args": {"num_datapoints": args.datapoints, "resolution": 32, "split": "val"}},
            "eval_dataloader": {"class": DataLoader,
                                "args": {"batch_size": args.batch_size, "collate_fn": collate_datapoints}},
            "model": {"class": workload.model, "args": workload.model_args},
            "metric": {"class": ClassificationMetric, "args": {}},
            "debugger": {"class": SequentialDebugger, "args": {"debuggers_config": [
                {"name": "d", "debugger_config": workload.debugger}]}}})
        self.evaluator._init_components_()
        self.evaluator.logger.setLevel(logging.WARNING)  # a line per pass would fill the table
        self.table, self.debugger = EpochTableHook(None), DebuggerHook()
        self.evaluator.hooks = Hooks([self.table, self.debugger])  # the runner's order: table rows, then capture
        self.debugger.before_run(self.evaluator)  # registers the debugger's hooks on the model, as a run starts
        self.model = self.evaluator.eval_model.eval()  # as the evaluator's _eval_loop puts it
        self.batches = list(self.evaluator.eval_dataloader)
        self.called = SequentialDebugger([{"name": "d", "debugger_config": workload.debugger}], model=self.model)

    def cases(self) -> dict[str, Callable[[], None]]:
        return {f"{path}: {case}": (lambda path=path, case=case: self.run(path, case))
                for path in PATHS for case in CASES}

    def clear(self) -> None:
        """The last pass's files removed, untimed: deleting them is no part of capturing (65 MB of pages took
        Lantern's pass 15 ms to unlink, the floor's 32 files 3 ms)."""
        shutil.rmtree(self.folder, ignore_errors=True)

    def run(self, path: str, case: str) -> None:
        handles, after = [], None
        if case == "floor" and self.workload.hook is not None:
            handles.append(self.workload.hook(self.model, self.folder))
        if case == "floor" and self.workload.after_batch is not None:
            writer, outputs = FloorWriter(self.folder), {}
            handles.append(self.model.register_forward_hook(lambda model, args, output: outputs.update(output)))

            def after(batch: dict) -> None:  # the loop's own forward pass gave the outputs
                with torch.enable_grad():
                    self.workload.after_batch(self.model, {**batch, "outputs": dict(outputs)}, writer)
        try:
            (self._seed_loop if path == "call" else self._runner_loop)(case == "Lantern", after)
        finally:
            for handle in handles:
                handle.remove()

    def _seed_loop(self, capture: bool, after: Optional[Callable[[dict], None]]) -> None:
        """The seed's evaluation loop: forward, then ``dp['debug'] = debugger(dp, model)``."""
        if capture:
            self.called.reset_buffer(self.folder)
            self.called.enabled = True
        with torch.no_grad():
            for batch in self.batches:
                dp = dict(batch)
                dp["outputs"] = self.model(dp["inputs"])
                if capture:
                    dp["debug"] = self.called(dp, self.model)
                if after is not None:
                    after(batch)
        if capture:
            self.called.save_all()
            self.called.enabled = False

    def _runner_loop(self, capture: bool, after: Optional[Callable[[dict], None]]) -> None:
        """The evaluator's pass: ``_eval_step`` per batch between its hooks' start and end of the pass, as its
        ``_eval_loop`` calls them (without capture, the debugger hook is left out of both: configured, not enabled)."""
        evaluator, eval_pass = self.evaluator, EvalPass(self.folder, None)
        evaluator.metric.reset_buffer()
        evaluator._seen_idx = SeenIdx(sum(len(batch["meta_info"]["idx"]) for batch in self.batches))
        self.table.before_eval_epoch(evaluator, eval_pass)
        if capture:
            self.debugger.before_eval_epoch(evaluator, eval_pass)
        with torch.no_grad():
            for batch in self.batches:
                evaluator._eval_step(dict(batch))
                if after is not None:
                    after(batch)
        if capture:
            self.debugger.after_eval_epoch(evaluator, eval_pass, {})

    def close(self) -> None:
        self.called.close()
        self.evaluator._close()


def report(name: str, workload: Workload, times: dict[str, list[float]], args: argparse.Namespace) -> None:
    medians = {case: statistics.median(values) for case, values in times.items()}
    for path in PATHS:
        none, lantern, floor = (f"{path}: {case}" for case in CASES)
        to_floor = [t / f for t, f in zip(times[lantern], times[floor])]
        low, _, high = statistics.quantiles(to_floor, n=4) if len(to_floor) > 1 else to_floor * 3
        print(f"| {name:<13} | {path:<6} | {medians[none] / args.datapoints * 1e3:>9.3f} "
              f"| {medians[lantern] / medians[none]:>14.3f} | {medians[floor] / medians[none]:>12.3f} "
              f"| {statistics.median(to_floor):>15.3f} | {low:.3f}–{high:.3f} | {workload.floor} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datapoints", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: stable on a shared machine)")
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--cpu-time", action="store_true", help="compare CPU time (all threads), not wall time")
    parser.add_argument("--forward-thread", action="store_true",
                        help="compare the CPU time of the thread running the loop alone (not the page writer's)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    clock, what = ((time.thread_time, "the loop's thread's CPU") if args.forward_thread
                   else (time.process_time, "CPU") if args.cpu_time else (time.perf_counter, "wall"))
    print(f"{args.datapoints} datapoints, batch {args.batch_size}, median of {args.rounds} interleaved rounds, "
          f"{what} time, {args.threads} torch thread(s); load average "
          f"{os.getloadavg()[0]:.2f}")
    print(f"| {'workload':<13} | {'path':<6} | {'none: ms/dp':>9} | {'Lantern x none':>14} | {'floor x none':>12} "
          f"| {'Lantern x floor':>15} | its rounds' middle half | floor |")
    print(f"| {'-' * 13} | {'-' * 6} | {'-' * 10}: | {'-' * 13}: | {'-' * 11}: | {'-' * 14}: | --- | --- |")
    for name in args.workloads:
        root = tempfile.mkdtemp(prefix="lantern-bench-")
        try:
            torch.manual_seed(0)
            cases = PathCases(WORKLOADS[name], root, args)
            try:
                for run in cases.cases().values():  # warm-up, dropped
                    cases.clear()
                    run()
                report(name, WORKLOADS[name], interleaved_times(cases.cases(), args.rounds, clock=clock,
                                                                before_each=cases.clear), args)
            finally:
                cases.close()
        finally:
            shutil.rmtree(root, ignore_errors=True)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
