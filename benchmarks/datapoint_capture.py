"""Cost of capturing each datapoint's inputs, labels and meta info (``runners/datapoint_capture.py``).

A trainer pays it once per run (its first validation), an evaluator once. A real
``BaseEvaluator``'s ``_eval_step`` runs over the same cached batches without and with
the capture (written to disk, flush included), interleaved in a new random order each
round; the medians are compared. With ``--resolution 320`` the images exceed the
default 256 KB per value and are downsampled while captured.

    python -m benchmarks.datapoint_capture [--datapoints 2000] [--resolution 32] [--rounds 9]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import torch
from torch.utils.data import DataLoader

from benchmarks.common import interleaved_medians
from data.datasets import SyntheticShapesDataset, collate_datapoints
from metrics import ClassificationMetric
from models import SmallCNN
from run_dir.names import DATAPOINTS_DIR
from runners.datapoint_capture import CaptureLimits
from runners.evaluators import BaseEvaluator
from runners.hooks import DatapointCaptureHook, EpochTableHook, EvalPass, Hooks
from runners.unique_idx import SeenIdx


def ready_evaluator(work_dir: str, datapoints: int, resolution: int, batch_size: int) -> BaseEvaluator:
    """A real BaseEvaluator (no debugger) on synthetic shapes, initialised as ``run`` does."""
    evaluator = BaseEvaluator({
        "runner": BaseEvaluator, "work_dir": work_dir,
        "eval_dataset": {"class": SyntheticShapesDataset,
                         "args": {"num_datapoints": datapoints, "resolution": resolution, "split": "val"}},
        "eval_dataloader": {"class": DataLoader, "args": {"batch_size": batch_size, "collate_fn": collate_datapoints}},
        "model": {"class": SmallCNN, "args": {}}, "metric": {"class": ClassificationMetric, "args": {}}})
    evaluator._init_components_()
    return evaluator


def eval_pass(evaluator: BaseEvaluator, batches: list[dict], capture: bool) -> None:
    """One evaluation pass as the runner does it (collecting its epoch table's rows), with or without capturing the
    datapoints."""
    capturing = DatapointCaptureHook(CaptureLimits())
    evaluator.hooks = Hooks([EpochTableHook(None), *([capturing] if capture else [])])
    pass_ = EvalPass(evaluator.work_dir, evaluator.eval_dataloader.dataset)
    evaluator.metric.reset_buffer()
    evaluator._seen_idx = SeenIdx(len(batches) * len(batches[0]["meta_info"]["idx"]))  # a new pass, as _eval_loop
    evaluator.hooks.call("before_eval_epoch", evaluator, pass_)
    with torch.no_grad():
        for dp in batches:
            evaluator._eval_step(dp)
    capturing.after_eval_epoch(evaluator, pass_, {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datapoints", type=int, default=2000)
    parser.add_argument("--resolution", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work_dir:
        evaluator = ready_evaluator(work_dir, args.datapoints, args.resolution, args.batch_size)
        batches = list(evaluator.eval_dataloader)
        medians = interleaved_medians({"no capture": lambda: eval_pass(evaluator, batches, False),
                                       "with capture": lambda: eval_pass(evaluator, batches, True)}, args.rounds)
        folder = os.path.join(work_dir, DATAPOINTS_DIR)
        size = sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder))
        evaluator._close()
    print(f"{args.datapoints} datapoints, {args.resolution} px, batch {args.batch_size}, {args.rounds} rounds; "
          f"captured {size / 2**20:.1f} MB")
    for name, seconds in medians.items():
        print(f"{name:14s} {seconds * 1e3:8.0f} ms per pass   ratio {seconds / medians['no capture']:.3f}")


if __name__ == "__main__":
    main()
