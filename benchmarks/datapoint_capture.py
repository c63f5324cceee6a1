"""Cost of capturing each datapoint's inputs, labels and meta info (``runners/datapoint_capture.py``).

A trainer pays it once per run (its first validation), an evaluator once. A real
``BaseEvaluator``'s ``_eval_step`` runs over the same cached batches without and with
the capture (written to disk, flush included), interleaved in a new random order each
round; the medians are compared. With ``--resolution 256`` the images exceed the
default 256 KB per value and are downsampled while captured.

    python -m benchmarks.datapoint_capture [--datapoints 2000] [--resolution 32] [--rounds 9]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile

import torch

from analysis.epoch_rows import EpochRows
from benchmarks.common import cached_batches, evaluator_config, ready_evaluator, timed
from runners.datapoint_capture import DATAPOINTS_DIR
from runners.evaluators import BaseEvaluator


def eval_pass(evaluator: BaseEvaluator, batches: list[dict], capture: bool) -> None:
    """One evaluation pass as the runner does it, with or without capturing the datapoints."""
    if capture:
        evaluator._start_datapoint_capture(once=False)
    evaluator.metric.reset_buffer()
    evaluator.epoch_rows = EpochRows.for_metric(evaluator.metric)
    with torch.no_grad():
        for dp in batches:
            evaluator._eval_step(dp)
    evaluator._finish_datapoint_capture()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datapoints", type=int, default=2000)
    parser.add_argument("--resolution", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work_dir:
        evaluator = ready_evaluator(evaluator_config(work_dir, args.datapoints, args.resolution, args.batch_size,
                                                     page_size_mb=16))
        evaluator.debugger = None
        batches = cached_batches(evaluator)
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.rounds):
            for capture in random.sample([False, True], 2):
                times[capture].append(timed(lambda capture=capture: eval_pass(evaluator, batches, capture)))
        folder = os.path.join(work_dir, DATAPOINTS_DIR)
        size = sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder))
        evaluator._close()
    off, on = statistics.median(times[False]), statistics.median(times[True])
    print(f"{args.datapoints} datapoints, {args.resolution} px, batch {args.batch_size}, {args.rounds} rounds; "
          f"captured {size / 2**20:.1f} MB")
    print(f"no capture      {off * 1e3:8.0f} ms per pass")
    print(f"with capture    {on * 1e3:8.0f} ms per pass   ratio {on / off:.3f}")


if __name__ == "__main__":
    main()
