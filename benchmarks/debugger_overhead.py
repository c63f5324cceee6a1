"""Eval-loop time: no debugger vs a configured-but-disabled one vs one capturing to disk.

Targets (DESIGN.md): disabled / none ≤ 1.02; enabled (feature maps of one layer, every
datapoint, written to disk) / none ≤ 1.3. The three modes run interleaved, in a new
random order each round (a fixed order lets one mode's after-effects, such as the
kernel flushing the last epoch's pages, always fall on the same next mode), on the
same batches; the median of each is compared.

    python -m benchmarks.debugger_overhead [--datapoints 2000] [--rounds 11]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile

import torch

from benchmarks.common import cached_batches, evaluator_config, ready_evaluator, timed
from runners.evaluators import BaseEvaluator


def eval_pass(evaluator: BaseEvaluator, batches: list[dict], mode: str, out_dir: str) -> None:
    """One validation pass over ``batches`` the way the runner does it, in one of three modes."""
    debugger = evaluator.debugger
    evaluator.debugger = None if mode == "none" else debugger
    if mode == "enabled":
        evaluator._start_debug_capture(out_dir)
    evaluator.metric.reset_buffer()
    with torch.no_grad():
        for dp in batches:
            evaluator._eval_step(dp)
    if mode == "enabled":
        evaluator._finish_debug_capture(out_dir)
    evaluator.debugger = debugger


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datapoints", type=int, default=2000)
    parser.add_argument("--resolution", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--layer", default="backbone.layer2")
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    with tempfile.TemporaryDirectory() as tmp:
        evaluator = ready_evaluator(evaluator_config(os.path.join(tmp, "run"), args.datapoints, args.resolution,
                                                     args.batch_size, page_size_mb=64, layer=args.layer))
        evaluator.logger.setLevel("WARNING")
        batches = cached_batches(evaluator)
        eval_pass(evaluator, batches, "none", "")  # warm-up
        times: dict[str, list[float]] = {"none": [], "disabled": [], "enabled": []}
        order = random.Random(0)
        for _ in range(args.rounds):
            for mode in order.sample(list(times), len(times)):
                times[mode].append(timed(lambda m=mode: eval_pass(evaluator, batches, m, os.path.join(tmp, "dbg"))))
        evaluator._close()
        size = sum(os.path.getsize(os.path.join(tmp, "dbg", f)) for f in os.listdir(os.path.join(tmp, "dbg")))
    median = {mode: statistics.median(values) for mode, values in times.items()}
    print(f"{args.datapoints} datapoints at {args.resolution}px, batch {args.batch_size}, capturing "
          f"{args.layer} ({size / 2**20:.0f} MB per epoch), median of {args.rounds} interleaved rounds")
    for mode, value in median.items():
        print(f"  {mode:9s} {value * 1e3:8.1f} ms  ({value / args.datapoints * 1e3:.3f} ms/datapoint)  "
              f"ratio to none {value / median['none']:.3f}")
    print(f"disabled/none = {median['disabled'] / median['none']:.3f} (target <= 1.02)")
    print(f"enabled/none  = {median['enabled'] / median['none']:.3f} (target <= 1.3)")


if __name__ == "__main__":
    main()
