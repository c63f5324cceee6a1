"""Peak memory of the failure analysis on wide epoch tables (default 100k datapoints x 150 and 600 summaries).

    python -m benchmarks.analysis_memory [--rows 100000] [--columns 150 600]

Writes an epoch table like that of a run with ``ActivationStatsDebugger`` on many layers (its 11 float32
summaries per layer, ``nonfinite_ratio`` 0 throughout), a site and a scale as meta info, 10-class labels,
predictions and probabilities, failures planted at one site on a hidden difficulty that every layer's statistics
follow (one cause with many correlated descriptions). Then, each in a fresh process: reading the table's values
alone (what the data itself takes), ``analysis.failures.analyze_table`` (the whole analysis, its findings stored
beside the table), and reading the stored findings back into the Failures tab's content (what the viewer does).
Prints each process's peak resident memory (``ru_maxrss``) and time, the slice search's own peak (``tracemalloc``
around ``find_slices``, which sees NumPy's allocations), how many conditions it searched, and the slices: one cause
must be one slice, its other descriptions under it. ``--rows 1000000 --columns 55`` is the issue's case (target:
at most 1 GB and 2 minutes on a quiet machine). Figures: docs/benchmarks.md, "Failure discovery".
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from typing import Any

import numpy as np

from analysis import failures
from analysis.epoch_table import EpochTable, write_epoch_table
from analysis.findings import load_findings, save_findings
from analysis.slices import candidate_conditions
from run_dir.findings_file import epoch_signature
from run_dir.names import EPOCH_TABLE_FILE

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STATS = ("mean", "std", "min", "max", "l1_norm", "l2_norm", "sparsity", "positive_ratio", "saturation_low",
         "saturation_high", "nonfinite_ratio")
CLASSES = 10


def write_table(path: str, rows: int, columns: int, seed: int = 0) -> None:
    """A table of ``columns`` ActivationStats-like summaries (float32) over ``rows`` datapoints, each layer's
    statistics moved by one hidden difficulty as a real network's are: rows at site C with a high difficulty
    fail half the time, the others 10%, so many conditions on many columns fail more and the beam keeps many
    children (the case that filled memory)."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(size=rows)
    loadings = rng.random(columns)
    summaries = {f"layer{j // len(STATS)}.{STATS[j % len(STATS)]}":
                 np.zeros(rows, np.float32) if STATS[j % len(STATS)] == "nonfinite_ratio"
                 else (loadings[j] * difficulty + rng.normal(size=rows)).astype(np.float32) for j in range(columns)}
    site = np.array(["A", "B", "C", "D"], dtype=object)[rng.integers(0, 4, rows)]
    hard = (site == "C") & (difficulty > 0.8)
    label = rng.integers(0, CLASSES, rows)
    failed = rng.random(rows) < np.where(hard, 0.5, 0.1)
    prediction = np.where(failed, (label + 1) % CLASSES, label)
    logits = rng.normal(size=(rows, CLASSES))
    logits[np.arange(rows), prediction] += 3
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    write_epoch_table(path, {"idx": np.arange(rows), "label": label, "prediction": prediction,
                             "probabilities": probabilities.astype(np.float32), "accuracy": (~failed).astype(float),
                             "site": site, "scale": rng.random(rows), **summaries},
                      {"scores": ["accuracy"], "higher_is_better": {"accuracy": True}, "meta": ["site", "scale"],
                       "summaries": list(summaries)})


def measure(path: str, part: str) -> dict[str, Any]:
    """Peak RSS of this process after ``part``: 'load' (the values alone), 'analyze' (the whole analysis, its
    findings stored beside the table) or 'stored' (reading the stored findings back and building the Failures
    tab's content from them, what the viewer does)."""
    table = EpochTable(path)
    start = time.perf_counter()
    if part == "load":
        table.arrays([name for name, _ in table.columns()] + ["probabilities"])
        return {"peak_rss_mb": _peak_rss_mb(), "seconds": time.perf_counter() - start}
    folder = os.path.dirname(path)
    if part == "stored":
        from runners.eval_viewer.failures import view as layout  # here: the other parts never load Dash

        findings = load_findings(folder)
        layout.findings_view(findings)
        for figure in (layout.separators_figure, layout.data_map_figure, layout.confusion_figure):
            figure(findings)
        return {"peak_rss_mb": _peak_rss_mb(), "seconds": time.perf_counter() - start}
    search: dict[str, Any] = {"conditions": 0, "find_slices_peak_mb": 0.0}
    find_slices = failures.find_slices

    def traced(columns: dict[str, np.ndarray], *args: Any, **kwargs: Any) -> Any:
        search["conditions"] += len(candidate_conditions(columns, args[2], kwargs.get("families")))
        tracemalloc.start()
        try:
            return find_slices(columns, *args, **kwargs)
        finally:
            search["find_slices_peak_mb"] = max(search["find_slices_peak_mb"],
                                                tracemalloc.get_traced_memory()[1] / 2**20)
            tracemalloc.stop()

    failures.find_slices = traced
    signature = epoch_signature(folder)
    findings = failures.analyze_table(table)
    save_findings(folder, findings, signature)
    return {"peak_rss_mb": _peak_rss_mb(), "seconds": time.perf_counter() - start, **search,
            "meta": [(s.description, s.also) for s in findings.meta.slices],
            "internals": [s.description for s in findings.internals.slices],
            "inside": [s.inside_model for s in findings.meta.slices]}


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(path: str, part: str) -> dict[str, Any]:
    """``measure`` in a fresh process, so each peak is its own."""
    code = ("import json; from benchmarks.analysis_memory import measure; "
            f"print(json.dumps(measure({path!r}, {part!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--columns", type=int, nargs="+", default=[150, 600], help="summary columns, one table each")
    args = parser.parse_args()
    for columns in args.columns:
        report(args.rows, columns)


def report(rows: int, columns: int) -> None:
    """Write a table of ``rows`` x ``columns`` summaries and print what reading it, analysing it and drawing its
    stored findings take."""
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, EPOCH_TABLE_FILE)
        write_table(path, rows, columns)
        size = os.path.getsize(path) / 2**20
        load, analysis, stored = child(path, "load"), child(path, "analyze"), child(path, "stored")
    print(f"\nepoch table: {rows} rows x {columns} summary columns ({size:.0f} MB on disk)")
    print(f"reading its values alone:   peak RSS {load['peak_rss_mb']:6.0f} MB ({load['seconds']:.1f} s)")
    print(f"the whole analysis:         peak RSS {analysis['peak_rss_mb']:6.0f} MB ({analysis['seconds']:.1f} s)")
    print(f"slice search (find_slices): tracemalloc peak {analysis['find_slices_peak_mb']:.0f} MB over "
          f"{analysis['conditions']} conditions")
    print(f"Failures tab from the stored findings: {stored['seconds']:.2f} s (read and laid out)")
    print(f"meta slices (with their other descriptions): {analysis['meta']}")
    print(f"internal slices left (those restating a meta slice are under it): {analysis['internals']}")
    print(f"inside the model, under each meta slice: {analysis['inside']}")


if __name__ == "__main__":
    main()
