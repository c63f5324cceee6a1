"""Peak memory of an epoch producing GBs of debug outputs, read time of one datapoint,
and page write throughput against raw ``numpy.save``.

Targets (DESIGN.md): peak RSS ≤ 3 × page size + 50 MB above the same epoch without
debugger, whatever the epoch's total (2 GB with 64 MB pages); opening one datapoint's
outputs ≤ 100 ms and flat as the epoch grows (200 MB vs 2 GB); page writes ≥ 0.7 × the
throughput of ``numpy.save`` to the same disk.

Each epoch runs in its own process so that peak RSS (``ru_maxrss``) belongs to it alone.

    python -m benchmarks.debug_memory_and_reads [--gb 2] [--page-mb 64] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

from benchmarks.common import cached_batches, evaluator_config, ready_evaluator, timed
from debuggers.page_format import write_page
from runners.eval_viewer.backend.initialization import load_debug_outputs

RESOLUTION = 64
LAYER = "backbone.layer1"  # 16 channels at 32x32: 64 KiB per datapoint
BYTES_PER_DATAPOINT = 16 * 32 * 32 * 4


def run_epoch(work_dir: str, datapoints: int, page_mb: float, capture: bool) -> dict:
    """One evaluation epoch of ``datapoints`` (8 distinct batches recycled under new idx)."""
    evaluator = ready_evaluator(evaluator_config(work_dir, 512, RESOLUTION, 64, page_mb, LAYER))
    evaluator.logger.setLevel("WARNING")
    batches = cached_batches(evaluator)[:8]
    if not capture:
        evaluator.debugger.close()
        evaluator.debugger = None
    debugger_dir = os.path.join(work_dir, "debugger")
    start = time.perf_counter()
    if capture:
        evaluator._start_debug_capture(debugger_dir)
    done = 0
    with torch.no_grad():
        while done < datapoints:
            dp = dict(batches[(done // 64) % len(batches)])
            dp["meta_info"] = {"idx": torch.arange(done, done + 64)}
            evaluator._eval_step(dp)
            done += 64
    if capture:
        evaluator._finish_debug_capture(debugger_dir)
    seconds = time.perf_counter() - start
    evaluator._close()
    return {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "seconds": seconds}


def child_epoch(work_dir: str, datapoints: int, page_mb: float, capture: bool) -> dict:
    code = (f"import json; from benchmarks.debug_memory_and_reads import run_epoch; "
            f"print(json.dumps(run_epoch({work_dir!r}, {datapoints}, {page_mb}, {capture})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return json.loads(out.stdout.strip().splitlines()[-1])


def read_times(work_dir: str, samples: int = 30) -> list[float]:
    """Cold-mapping reads: a fresh ``load_debug_outputs`` (index parse) plus one datapoint each time."""
    total = len(load_debug_outputs(work_dir))
    picks = random.Random(0).sample(range(total), samples)
    return [timed(lambda i=i: load_debug_outputs(work_dir)[i]["features"]["features"].sum()) for i in picks]


def write_throughput(folder: str, page_mb: int, rounds: int = 5) -> tuple[float, float]:
    """MB/s of ``write_page`` and of ``numpy.save`` writing the same bytes, interleaved."""
    arrays = [np.random.rand(16, 32, 32).astype(np.float32) for _ in range(page_mb * 2**20 // BYTES_PER_DATAPOINT)]
    page = {i: {"features": {"features": a}} for i, a in enumerate(arrays)}
    stacked = np.stack(arrays)
    page_times, save_times = [], []
    for r in range(rounds):
        page_times.append(timed(lambda r=r: write_page(os.path.join(folder, f"page_{r}.pkl"), page)))
        save_times.append(timed(lambda r=r: np.save(os.path.join(folder, f"raw_{r}.npy"), stacked)))
    return page_mb / statistics.median(page_times), page_mb / statistics.median(save_times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=2.0)
    parser.add_argument("--small-gb", type=float, default=0.2)
    parser.add_argument("--page-mb", type=int, default=64)
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the epochs are written")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="lantern-bench-", dir=args.dir)
    try:
        big, small = (int(gb * 2**30 / BYTES_PER_DATAPOINT) // 64 * 64 for gb in (args.gb, args.small_gb))
        base = child_epoch(os.path.join(root, "none"), big, args.page_mb, capture=False)
        large = child_epoch(os.path.join(root, "large"), big, args.page_mb, capture=True)
        little = child_epoch(os.path.join(root, "small"), small, args.page_mb, capture=True)
        excess = large["peak_rss_mb"] - base["peak_rss_mb"]
        print(f"Peak RSS, {big} datapoints, {big * BYTES_PER_DATAPOINT / 2**30:.2f} GB of captures, "
              f"{args.page_mb} MB pages:")
        print(f"  without debugger {base['peak_rss_mb']:.0f} MB ({base['seconds']:.1f} s), with debugger "
              f"{large['peak_rss_mb']:.0f} MB ({large['seconds']:.1f} s): +{excess:.0f} MB "
              f"(target <= {3 * args.page_mb + 50} MB), small epoch peak {little['peak_rss_mb']:.0f} MB")
        for name, gb in (("small", args.small_gb), ("large", args.gb)):
            times = read_times(os.path.join(root, name))
            print(f"  open one datapoint, {gb:g} GB epoch: median {statistics.median(times) * 1e3:.1f} ms, "
                  f"max {max(times) * 1e3:.1f} ms (target <= 100 ms, flat)")
        shutil.rmtree(os.path.join(root, "large"))
        page_rate, save_rate = write_throughput(root, args.page_mb)
        print(f"  page write {page_rate:.0f} MB/s vs numpy.save {save_rate:.0f} MB/s: "
              f"ratio {page_rate / save_rate:.2f} (target >= 0.7)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
