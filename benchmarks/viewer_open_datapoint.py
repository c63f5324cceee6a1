"""Eval viewer: time to open one datapoint with debug outputs, and start-up time, for a 200 MB and a 2 GB epoch.

"Open" is what the Datapoint tab's callback does on a click (``render_datapoint``:
rebuild the dataset item, read the one page holding the datapoint, build the
figures) plus the JSON encoding Dash sends to the browser. Start-up is
``create_app`` plus the first run listing (the page layout). Targets: opening
≤ 300 ms, start-up independent of the epoch's volume.

Pages are written directly with ``PageWriter`` (64 MB pages of synthetic float32
feature maps, 1 MiB per datapoint) into an evaluator-like run in a temporary
folder, deleted at the end. "cold" opens first evict the pages from the OS page
cache (fsync + POSIX_FADV_DONTNEED), so they include the disk read.

    python -m benchmarks.viewer_open_datapoint [--sizes-mb 200 2048] [--page-mb 64] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable

import numpy as np
from plotly.io.json import to_json_plotly

from debuggers.outputs import KIND_FEATURE_MAP
from debuggers.pages.file_format import PAGE_GLOB
from debuggers.pages.reader import load_debug_outputs
from debuggers.pages.writer import PageWriter
from run_dir.names import DEBUGGER_DIR, EVALUATION_SCORES_FILE, RUN_INFO_FILE
from runners.eval_viewer.app import create_app
from runners.eval_viewer.datapoint.view import render_datapoint
from runners.eval_viewer.figures.registry import output_figures
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.runs import EVALUATION_KEY

CHANNELS, SIDE = 64, 64  # one 64x64x64 float32 map: 1 MiB per datapoint
DATAPOINT_BYTES = CHANNELS * SIDE * SIDE * 4
OPENS = 9
STARTUPS = 5
CONFIG = """
from data.datasets import SyntheticShapesDataset
from metrics import ClassificationMetric
from models import SmallCNN
from runners.evaluators import BaseEvaluator

config = {{"runner": BaseEvaluator, "model": {{"class": SmallCNN, "args": {{}}}},
          "metric": {{"class": ClassificationMetric, "args": {{}}}},
          "eval_dataset": {{"class": SyntheticShapesDataset,
                           "args": {{"num_datapoints": {count}, "resolution": 64, "split": "val"}}}}}}
"""


def feature_map_output(idx: int, base: np.ndarray) -> dict:
    fmap = base * np.float32(1 + idx * 1e-3)
    return {"kind": KIND_FEATURE_MAP, "layer_name": "backbone.layer1", "feature_map": fmap,
            "channel_indices": np.arange(CHANNELS), "shape": [CHANNELS, SIDE, SIDE],
            "stats": {"mean": float(fmap.mean()), "std": float(fmap.std()), "min": float(fmap.min()),
                      "max": float(fmap.max())}}


def build_run(root: str, name: str, total_mb: int, page_mb: int) -> str:
    """An evaluator-like run with ``total_mb`` of debug pages; its config lives outside the log folder."""
    count = total_mb * 2**20 // DATAPOINT_BYTES
    run_dir = os.path.join(root, name, "logs", "run")
    config_path = os.path.join(root, name, "config.py")
    os.makedirs(run_dir)
    with open(config_path, "w") as f:
        f.write(CONFIG.format(count=count))
    base = np.random.default_rng(0).standard_normal((CHANNELS, SIDE, SIDE)).astype(np.float32)
    with PageWriter(page_mb * 2**20) as writer:
        writer.start_epoch(os.path.join(run_dir, DEBUGGER_DIR))
        for idx in range(count):
            writer.add(idx, {"features": feature_map_output(idx, base)})
        writer.flush()
    losses = np.random.default_rng(1).exponential(size=count).tolist()
    _write_json(os.path.join(run_dir, EVALUATION_SCORES_FILE), {
        "aggregated": {"cross_entropy": float(np.mean(losses))}, "per_datapoint": {"cross_entropy": losses},
        "datapoint_idx": list(range(count)), "higher_is_better": {"cross_entropy": False}})
    _write_json(os.path.join(run_dir, RUN_INFO_FILE), {"runner": "BaseEvaluator", "config_filepath": config_path})
    return run_dir


def _write_json(path: str, obj: object) -> None:
    with open(path, "w") as f:
        json.dump(obj, f)


def evict_pages(run_dir: str) -> None:
    """Drop the pages from the OS page cache so the next read comes from disk."""
    for path in glob.glob(os.path.join(run_dir, DEBUGGER_DIR, PAGE_GLOB)):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def one_idx_per_page(run_dir: str) -> list[int]:
    first: dict[str, int] = {}
    for idx, page in sorted(load_debug_outputs(run_dir).locations.items()):
        first.setdefault(page, idx)
    chosen = list(first.values())
    return chosen[:: max(1, len(chosen) // OPENS)][:OPENS]


def open_datapoint(backend: ViewerBackend, run_dir: str, idx: int) -> str:
    """The Datapoint callback's work and Dash's JSON encoding of its result."""
    return to_json_plotly(render_datapoint(backend, run_dir, EVALUATION_KEY, idx))


def cold_times(run_dir: str, action: Callable[[int], object]) -> list[float]:
    """``action(idx)`` timed for one datapoint per page, the pages evicted from the OS cache before each."""
    times = []
    for idx in one_idx_per_page(run_dir):  # consecutive ones lie on different pages: each action reads one
        evict_pages(run_dir)
        times.append(_seconds(lambda i=idx: action(i)))
    return times


def measure(run_dir: str) -> dict:
    backend = ViewerBackend([os.path.dirname(run_dir)], trust_configs=True)  # the run is this script's own
    run = backend.run(run_dir)
    dataset_build = _seconds(lambda: backend.dataset(run))  # once per run: the config imported, the dataset built
    debug = backend.debug(backend.epoch(run, EVALUATION_KEY))
    cold = cold_times(run_dir, lambda idx: open_datapoint(backend, run_dir, idx))
    reads = cold_times(run_dir, debug.get)
    idx = one_idx_per_page(run_dir)[-1]  # its page is in the viewer's page cache now
    warm = [_seconds(lambda: open_datapoint(backend, run_dir, idx)) for _ in range(5)]
    output = debug.get(idx)["features"]
    figures = [_seconds(lambda: output_figures(output)) for _ in range(5)]
    return {"pages": len(glob.glob(os.path.join(run_dir, DEBUGGER_DIR, PAGE_GLOB))), "dataset": dataset_build,
            "cold": statistics.median(cold), "cold_max": max(cold), "read": statistics.median(reads),
            "warm": statistics.median(warm), "figures": statistics.median(figures),
            "startup": statistics.median(time_startup(run_dir) for _ in range(STARTUPS))}


def _seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def time_startup(run_dir: str) -> float:
    def start() -> None:
        app = create_app([os.path.dirname(run_dir)])
        app.layout()
        app.viewer_backend.epochs(app.viewer_backend.run(run_dir))

    return _seconds(start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-mb", type=int, nargs="+", default=[200, 2048])
    parser.add_argument("--page-mb", type=int, default=64)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    needed = sum(args.sizes_mb) * 2**20 * 1.1 + 2**29
    free = shutil.disk_usage(args.dir).free
    if free < needed:
        raise SystemExit(f"{args.dir} has {free / 2**30:.1f} GB free, the benchmark needs {needed / 2**30:.1f} GB; "
                         "pass --dir on a disk with more space or smaller --sizes-mb")
    root = tempfile.mkdtemp(prefix="lantern_viewer_bench_", dir=args.dir)
    try:
        runs = {size: build_run(root, f"{size}mb", size, args.page_mb) for size in args.sizes_mb}
        results = {size: measure(run_dir) for size, run_dir in runs.items()}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{'epoch':>8} {'pages':>6} {'cold open':>10} {'cold max':>9} {'warm open':>10} {'page read':>10} "
          f"{'figures':>8} {'dataset':>8} {'start-up':>9}   (ms; {args.page_mb} MB pages, 1 MiB per datapoint)")
    for size, r in results.items():
        print(f"{size:>6}MB {r['pages']:>6} {r['cold'] * 1e3:>10.0f} {r['cold_max'] * 1e3:>9.0f} "
              f"{r['warm'] * 1e3:>10.0f} {r['read'] * 1e3:>10.0f} {r['figures'] * 1e3:>8.0f} "
              f"{r['dataset'] * 1e3:>8.0f} {r['startup'] * 1e3:>9.1f}")
    print("cold open: the page read from disk (medians over one datapoint per page, at most 9); warm: the page in "
          "the viewer's page cache; page read: the cold read alone; figures: output_figures alone (part of "
          "every open); dataset: first open of a run (config import, once per run)")


if __name__ == "__main__":
    main()
