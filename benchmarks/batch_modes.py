"""What running per datapoint costs: the seeds' five example debuggers (``debugger_examples.md``, as written, in
``tests/seeds/seedproj``) on their example model, batched against per datapoint, side by side.

    python -m benchmarks.batch_modes [--datapoints 512] [--batch-sizes 8 32] [--rounds 7] [--cpu-time]

Cases, each a whole evaluation pass (forward, the five debuggers, pages written), in a new random order each round:

* **no capture**: the evaluation loop alone;
* **batched**: the five classes with ``batch_mode = 'batched'`` declared: one ``process_forward`` (or call) per batch.
  Their outputs are then the batch's, not each datapoint's: this is only what the same code costs run once a batch;
* **per datapoint, declared**: ``batch_mode = 'per_datapoint'``: one call per datapoint, on its slice;
* **per datapoint, found**: as written (undeclared): Lantern runs each both ways on the first batch, finds that
  they are not batch-first, then runs them per datapoint (the check is paid once per run; here once per pass).

Printed: milliseconds per datapoint of each pass, and of the capture alone (the pass minus the loop without
capture), with the ratio per datapoint / batched of the capture.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

import torch

from benchmarks.common import interleaved_times, run_loop
from data.datasets import SyntheticShapesDataset, collate_datapoints
from debuggers.batch_mode import BATCHED, PER_DATAPOINT
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from tests.seeds.seedproj.config import config as seed_config
from tests.seeds.seedproj.models import SeedNet


def seed_debuggers(mode: str | None) -> list[dict]:
    """The seeds' config entries, each class declaring ``mode`` (None: as written)."""
    entries = []
    for entry in seed_config["debugger"]["args"]["debuggers_config"]:
        cls = entry["debugger_config"]["class"]
        declared = cls if mode is None else type(cls.__name__, (cls,), {"batch_mode": mode})
        entries.append({**entry, "debugger_config": {**entry["debugger_config"], "class": declared}})
    return entries


def capture_pass(model: torch.nn.Module, batches: list[dict], mode: str | None):
    def run() -> None:
        folder = tempfile.mkdtemp(prefix="lantern-batch-modes-")
        debugger = SequentialDebugger(seed_debuggers(mode), page_size_mb=100, model=model)
        try:
            debugger.reset_buffer(folder)
            debugger.enabled = True
            run_loop(model, batches, debugger)
        finally:
            debugger.close()
            shutil.rmtree(folder, ignore_errors=True)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datapoints", type=int, default=512)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cpu-time", action="store_true", help="compare CPU time instead of wall time")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = SeedNet().eval()
    dataset = SyntheticShapesDataset(num_datapoints=args.datapoints, resolution=16, split="val")
    datapoints = [dataset[i] for i in range(len(dataset))]
    clock = time.process_time if args.cpu_time else time.perf_counter
    print(f"load {os.getloadavg()[0]:.1f}; {args.datapoints} datapoints, {args.rounds} rounds, "
          f"{'CPU' if args.cpu_time else 'wall'} time, {args.threads} thread(s); ms per datapoint (median)")
    for batch_size in args.batch_sizes:
        batches = [collate_datapoints(datapoints[i:i + batch_size]) for i in range(0, len(datapoints), batch_size)]
        cases = {"no capture": lambda batches=batches: run_loop(model, batches),
                 "batched": capture_pass(model, batches, BATCHED),
                 "per datapoint, declared": capture_pass(model, batches, PER_DATAPOINT),
                 "per datapoint, found": capture_pass(model, batches, None)}
        times = interleaved_times(cases, args.rounds, clock=clock)
        per = {name: 1000 * statistics.median(values) / args.datapoints for name, values in times.items()}
        base = per["no capture"]
        print(f"batch {batch_size}:")
        for name, ms in per.items():
            capture = "" if name == "no capture" else f"   capture {ms - base:7.3f} ms"
            print(f"  {name:<26} {ms:7.3f} ms{capture}")
        ratio = (per["per datapoint, declared"] - base) / max(per["batched"] - base, 1e-9)
        print(f"  capture per datapoint / batched: {ratio:.2f}x")


if __name__ == "__main__":
    main()
