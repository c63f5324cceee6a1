"""Epoch table at scale: 1,000,000 datapoints x 50 columns, collected, written, and queried page by page.

    python -m benchmarks.epoch_table [--rows 1000000] [--repeats 7]

Targets (docs/benchmarks.md): written in <= 10 s; a filter+sort page query <= 300 ms. The columns are
what a run collects: label, prediction and their class names, 6 class probabilities, 4 scores, 6 meta
fields, and 36 debugger summary columns, gathered from per-batch chunks exactly as a run's collectors
hold them. As a floor for the queries, the same filter+sort is timed in NumPy on columns already in memory.
The viewer's score grid (two columns of every row read, at most 10,000 cells drawn) is timed as well.
The queries run interleaved (a new random order each round); each gets its median wall time and its median
CPU time (this process's, all threads): on a machine shared with other work the CPU time is the steadier
figure, and with DuckDB's threads the wall time can be below it. The load average is printed beside them.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from analysis.epoch_rows import EpochRows, gather_epoch_columns
from analysis.epoch_table import EpochTable, write_epoch_table
from benchmarks.common import timed
from data.datasets import SyntheticShapesDataset
from debuggers.base_debugger import BaseDebugger
from debuggers.summaries import DebuggerSummaries
from run_dir.names import EPOCH_TABLE_FILE
from runners.eval_viewer.scores.data import grid_data

BATCH = 1024
CLASSES = 6
SUMMARY_KEYS = tuple(f"stat{k}" for k in range(12))


class ThreeLayerStats(BaseDebugger):
    """A debugger whose summary gives 12 floats per datapoint (three such debuggers: 36 columns)."""

    def __call__(self, datapoint: dict, model: torch.nn.Module) -> torch.Tensor:
        return datapoint["stats"]

    def summary(self, output: torch.Tensor) -> dict[str, float]:
        return dict(zip(SUMMARY_KEYS, output.tolist()))


def synthetic_batch(rng: np.random.Generator, start: int, size: int) -> dict:
    labels = rng.integers(0, CLASSES, size)
    return {
        "meta_info": {"idx": torch.arange(start, start + size), "scale": rng.uniform(0.2, 0.4, size).tolist(),
                      "occluded": (rng.random(size) < 0.3).tolist(), "clutter": rng.integers(0, 4, size).tolist(),
                      "noise_std": rng.uniform(0.02, 0.15, size).tolist(),
                      "contrast": rng.uniform(0.15, 0.6, size).tolist(),
                      "class_name": [SyntheticShapesDataset.CLASS_NAMES[c] for c in labels]},
        "labels": {"class": torch.from_numpy(labels)},
        "outputs": {"logits": torch.from_numpy(rng.normal(size=(size, CLASSES)).astype(np.float32))},
        "stats": torch.from_numpy(rng.random((size, len(SUMMARY_KEYS))).astype(np.float32)),
    }


def scores_of(columns_rows: EpochRows, rows: int, rng: np.random.Generator) -> dict:
    accuracy = (rng.random(rows) < 0.85).astype(float)
    return {"datapoint_idx": list(range(rows)), "per_datapoint": {
        "accuracy": accuracy.tolist(), "cross_entropy": rng.exponential(size=rows).tolist(),
        "true_class_confidence": rng.random(rows).tolist(), "predicted_class": rng.integers(0, 6, rows).tolist()}}


def collect(rows: int) -> tuple[dict, float, float]:
    """Feed both collectors batch by batch; returns the columns, seconds spent in the collectors (making the
    batches not counted), seconds to gather them into columns."""
    rng = np.random.default_rng(0)
    epoch_rows = EpochRows("logits", "class")
    debuggers = {f"layer{k}_stats": ThreeLayerStats() for k in (2, 3, 4)}
    summaries = DebuggerSummaries(debuggers, logging.getLogger("benchmark"))
    collected = 0.0
    for first in range(0, rows, BATCH):
        batch = synthetic_batch(rng, first, min(BATCH, rows - first))
        idx = batch["meta_info"]["idx"].tolist()
        split = {name: list(batch["stats"]) for name in debuggers}  # what the batch split hands over
        start = time.perf_counter()
        epoch_rows.add_batch(batch)
        summaries.add_batch(idx, split)
        collected += time.perf_counter() - start
    scores = scores_of(epoch_rows, rows, rng)
    start = time.perf_counter()
    columns, _ = gather_epoch_columns(scores, epoch_rows, summaries, SyntheticShapesDataset.CLASS_NAMES, True)
    return columns, collected, time.perf_counter() - start


def numpy_floor(columns: dict) -> None:
    keep = np.flatnonzero((columns["accuracy"] == 0) & columns["occluded"])
    order = keep[np.argsort(-columns["layer3_stats.stat0"][keep], kind="stable")]
    return order[500:600]


def interleaved_ms(queries: dict[str, Callable[[], Any]], repeats: int) -> dict[str, tuple[float, float, float]]:
    """Median wall ms, max wall ms and median CPU ms of each query, rounds in a new random order each time."""
    wall: dict[str, list[float]] = {name: [] for name in queries}
    cpu: dict[str, list[float]] = {name: [] for name in queries}
    order = random.Random(0)
    for _ in range(repeats):
        for name in order.sample(list(queries), len(queries)):
            start_cpu, start = time.process_time(), time.perf_counter()
            queries[name]()
            wall[name].append(1000 * (time.perf_counter() - start))
            cpu[name].append(1000 * (time.process_time() - start_cpu))
    return {name: (statistics.median(wall[name]), max(wall[name]), statistics.median(cpu[name])) for name in queries}


def load() -> str:
    return "load average " + ", ".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=7, help="rounds of the interleaved queries")
    args = parser.parse_args()

    columns, collected, gathered = collect(args.rows)
    scalar = [name for name, values in columns.items() if values.ndim == 1]
    print(f"{args.rows} rows, {len(scalar)} scalar columns + probabilities ({CLASSES} classes)")
    print(f"collect (both collectors, 36 summary floats per datapoint from 3 debuggers' summary(), batches of "
          f"{BATCH}): {collected:.2f} s = {1e6 * collected / args.rows:.1f} us per datapoint; gather into "
          f"columns: {gathered:.2f} s")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, EPOCH_TABLE_FILE)
        written = timed(lambda: write_epoch_table(path, columns))
        print(f"write_epoch_table: {written:.2f} s (target <= 10 s), {os.path.getsize(path) / 2**20:.0f} MB")
        table = EpochTable(path)
        where = [("accuracy", "=", 0), ("occluded", "=", True)]
        queries = {
            "filter+sort page (2 conditions, offset 500)": lambda: table.page(
                where, order_by="layer3_stats.stat0", offset=500, limit=100),
            "sort page, no filter (offset 10000)": lambda: table.page(
                order_by="cross_entropy", offset=10_000, limit=100),
            "filter to 10,000 idx + sort page": lambda: table.page(
                [("idx", "in", list(range(0, args.rows, max(1, args.rows // 10_000))))],
                order_by="cross_entropy", limit=100),
            "count with a filter": lambda: table.count(where),
            "percentile of a value": lambda: table.percentile("cross_entropy", 1.0),
            "viewer: score grid data, every datapoint": lambda: grid_data(table, "cross_entropy", False),
            "viewer: score grid data, 10,000 chosen idx": lambda: grid_data(
                table, "cross_entropy", False, [("idx", "in", list(range(0, args.rows, max(1, args.rows // 10_000))))]),
        }
        floor = statistics.median(timed(lambda: numpy_floor(columns)) * 1000 for _ in range(args.repeats))
        assert [r["idx"] for r in table.page(where, order_by="layer3_stats.stat0", offset=500, limit=100)] \
            == numpy_floor(columns).tolist(), "the page differs from NumPy's"
        print(f"{load()} before the queries")
        print(f"{'query':48s} {'median ms':>10s} {'max ms':>8s} {'CPU ms':>8s}   (NumPy in memory, same "
              f"filter+sort: {floor:.0f} ms)")
        for name, (median, worst, cpu) in interleaved_ms(queries, args.repeats).items():
            print(f"{name:48s} {median:10.0f} {worst:8.0f} {cpu:8.0f}")
        print(f"{load()} after the queries")


if __name__ == "__main__":
    main()
