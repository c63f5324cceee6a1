"""The Failures tab of a 1M-datapoint epoch in a real headless Chromium: its findings stored after validation
against computed when the tab is opened.

    python -m benchmarks.failures_tab [--rows 1000000] [--rounds 3]

Two copies of one run of two epochs (``benchmarks.analysis_memory.write_table``: 55 summary columns, a site, one
cause with many correlated descriptions): ``stored``, whose last epoch's findings were stored as the trainer stores
them (``analysis.failures.analyze(..., save=True)``), and ``computed``, without them (a run from before, or an analysis
that did not finish). The viewer is served on 127.0.0.1; each round opens each run (alternating the order) on the
Datapoint tab, clicks the Failures tab and takes, in the browser's clock, the time from the click to the first
finding and the charts on screen. A fresh viewer serves each round, so no round finds the findings already
in the viewer's memory. Target (issue 26): at most 1 s with stored findings.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile

from analysis.epoch_table import EpochTable
from analysis.failures import analyze
from benchmarks.analysis_memory import write_table
from benchmarks.viewer_browser import CHROMIUM, CHROMIUM_ARGS, SHOWN, serve
from run_dir.names import EPOCH_TABLE_FILE, RUN_INFO_FILE, VALIDATION_SCORES_FILE, epoch_dir_name
from runners.eval_viewer.datapoint.ids import TAB_DATAPOINT
from runners.eval_viewer.failures.ids import (
    FAILURES_CONFUSION_CHART,
    FAILURES_PANEL,
    FAILURES_SEPARATORS_CHART,
    TAB_FAILURES,
)

DRAWN = f"""() => document.querySelector('#{FAILURES_PANEL} .finding-button')
    && document.querySelector('#{FAILURES_SEPARATORS_CHART} .main-svg')
    && document.querySelector('#{FAILURES_CONFUSION_CHART} .heatmaplayer')"""


def write_run(folder: str, rows: int) -> str:
    """A trainer's run of two epochs of ``rows`` datapoints (epoch tables and scores files)."""
    run = os.path.join(folder, "stored")
    os.makedirs(run)
    with open(os.path.join(run, RUN_INFO_FILE), "w") as f:
        json.dump({"runner": "BaseTrainer"}, f)
    for epoch in range(2):
        epoch_dir = os.path.join(run, epoch_dir_name(epoch))
        os.makedirs(epoch_dir)
        write_table(os.path.join(epoch_dir, EPOCH_TABLE_FILE), rows, 55, seed=epoch)
        accuracy = EpochTable(os.path.join(epoch_dir, EPOCH_TABLE_FILE)).arrays(["accuracy"])["accuracy"]
        with open(os.path.join(epoch_dir, VALIDATION_SCORES_FILE), "w") as f:
            json.dump({"aggregated": {"accuracy": float(accuracy.mean())},
                       "per_datapoint": {"accuracy": accuracy.tolist()}, "datapoint_idx": list(range(rows)),
                       "higher_is_better": {"accuracy": True}}, f)
    return run


def tab_ms(browser, url: str) -> float:
    """Milliseconds from a click on the Failures tab to its findings drawn."""
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.goto(url)
    page.wait_for_function(SHOWN, timeout=120_000)
    start = page.evaluate("performance.now()")
    page.click(f"#{TAB_FAILURES}")
    page.wait_for_function(DRAWN, timeout=600_000)
    elapsed = page.evaluate("performance.now()") - start
    page.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder:
        stored = write_run(folder, args.rows)
        computed = shutil.copytree(stored, os.path.join(folder, "computed"))
        analyze(os.path.join(stored, epoch_dir_name(1)), save=True)
        times: dict[str, list[float]] = {"stored": [], "computed": []}
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for round_ in range(args.rounds):
                server, url = serve([folder])
                try:
                    runs = {"stored": stored, "computed": computed}
                    for name in (list(runs) if round_ % 2 == 0 else list(runs)[::-1]):
                        times[name].append(tab_ms(browser, f"{url}?run={runs[name]}&epoch=epoch_1&"
                                                           f"tab={TAB_DATAPOINT}"))
                finally:
                    server.shutdown()
            browser.close()
    print(f"\nFailures tab of a {args.rows:,}-datapoint epoch, click to findings drawn (median of {args.rounds}):")
    for name, values in times.items():
        print(f"  findings {name:8s}: {statistics.median(values) / 1000:6.2f} s  {[round(v) for v in values]} ms")
    print(f"  ratio computed / stored: {statistics.median(times['computed']) / statistics.median(times['stored']):.0f}")


if __name__ == "__main__":
    main()
