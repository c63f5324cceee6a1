"""The HTML export of a few hundred datapoints: its size, how long it takes to write, and to open in Chromium.

The default example (``configs/examples/cnn_trainer.py``) is trained with ``--datapoints`` validation datapoints
(its training set shrunk, so the run takes a minute), and the report of all of them is written by the export's
command line (``python -m runners.eval_viewer.export``), in a process of its own. With ``--baseline DIR`` the
same report is also written by another checkout (e.g. ``main`` before a change) and the two are opened
alternately, side by side under the same load.

- size: the file's bytes;
- write: the command's wall time (Python start-up included);
- open: navigation start to the first screen drawn, in Chromium's own clock (every picture on screen decoded,
  every chart on screen drawn; a report that draws its charts while loading has them drawn when ``load`` fires),
  and to the ``load`` event; the target is "in seconds" (the 250-datapoint report took 60 s before).

With ``--segmentation-run DIR`` (a run of ``configs/examples/promptable_segmentation_trainer.py``) the report of its
first ``--segmentation-datapoints`` (25) is measured too, after the default example's, in the same run.

- the viewer's Export button: the same report from a running viewer (``python -m runners.eval_viewer``, a process
  of each checkout), its table narrowed to those datapoints: the export callback's answer over HTTP, the report
  in it (no Python start-up: the viewer has its modules imported and, after a first untimed export, its table and
  pages open, as after browsing); ``--clicks`` (3) each, interleaved, the median.

    python -m benchmarks.export_report [--datapoints 250] [--opens 5] [--clicks 3] [--baseline DIR]
        [--segmentation-run DIR] [--segmentation-datapoints 25]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack

from benchmarks.viewer_browser import CHROMIUM, CHROMIUM_ARGS, REPO_ROOT
from run_dir import RunDir
from run_dir.names import DEBUGGER_DIR
from runners.config_file import load_config
from runners.eval_viewer.export.ids import EXPORT_BUTTON, EXPORT_DOWNLOAD
from runners.eval_viewer.table.ids import TABLE, TABLE_QUERY
from runners.trainers import BaseTrainer
from tests.reliability.viewer_server import dependencies, post_callback, viewer_process

OPEN_WAIT_MS = 600_000  # a way out for a report that never finishes loading, not how long one takes
FIRST_SCREEN_DRAWN = """() => {
    const onScreen = (node) => { const box = node.getBoundingClientRect();
                                 return box.bottom > 0 && box.top < window.innerHeight; };
    const pictures = [...document.querySelectorAll('img')].filter(onScreen);
    const charts = [...document.querySelectorAll('.lazy-graph, .plotly-graph-div')].filter(onScreen);
    return document.readyState === 'complete' && pictures.every((img) => img.complete && img.naturalWidth > 0)
        && charts.every((chart) => chart.querySelector('.main-svg'));
}"""


def train_example(folder: str, datapoints: int) -> str:
    config = load_config(os.path.join(REPO_ROOT, "configs", "examples", "cnn_trainer.py"))
    config["work_dir"] = os.path.join(folder, "cnn_trainer")
    config["train_dataset"]["args"]["num_datapoints"] = 256
    config["val_dataset"]["args"]["num_datapoints"] = datapoints
    BaseTrainer(config).run()
    return config["work_dir"]


def write_report(root: str, run: str, datapoints: int, out: str) -> float:
    """Seconds the checkout at ``root`` takes to write the report of idx 0..datapoints-1 of ``run``."""
    command = [sys.executable, "-m", "runners.eval_viewer.export", "--run", run, "--out", out,
               "--idx", *map(str, range(datapoints))]
    start = time.perf_counter()
    subprocess.run(command, cwd=root, env=dict(os.environ, PYTHONPATH=root), check=True, capture_output=True)
    return time.perf_counter() - start


def button_seconds(roots: dict[str, str], run: str, datapoints: int, clicks: int) -> dict[str, list[float]]:
    """Seconds each checkout's viewer takes to answer the Export button of idx 0..datapoints-1 of ``run``'s latest
    epoch with debug outputs (the table narrowed to them), ``clicks`` times each, interleaved, after one untimed."""
    epoch = os.path.basename(RunDir(run).epoch_dir(None, DEBUGGER_DIR))
    values = {f"{TABLE_QUERY}.data": {"run": run, "epoch": epoch, "idx": list(range(datapoints))},
              f"{TABLE}.getRowsRequest": {"startRow": 0, "endRow": 100}, f"{EXPORT_BUTTON}.n_clicks": 1}
    times: dict[str, list[float]] = {name: [] for name in roots}
    with ExitStack() as stack:
        urls = {name: stack.enter_context(viewer_process(["--log-dirs", run], cwd=root))[0]
                for name, root in roots.items()}
        callbacks = {name: next(c for c in dependencies(url) if EXPORT_DOWNLOAD in c["output"])
                     for name, url in urls.items()}
        for round_ in range(clicks + 1):
            for name in list(roots) if round_ % 2 == 0 else list(roots)[::-1]:
                start = time.perf_counter()
                status, body = post_callback(urls[name], callbacks[name], values)
                if status != 200 or f"exported {datapoints} datapoints" not in body:
                    raise SystemExit(f"the {name} viewer did not export: HTTP {status}, {body[:300]}")
                if round_:
                    times[name].append(time.perf_counter() - start)
    return times


def open_ms(browser, path: str) -> tuple[float, float]:
    """Milliseconds from navigation start to the first screen drawn, and to the ``load`` event."""
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.goto(f"file://{path}", timeout=OPEN_WAIT_MS)
    page.wait_for_function(FIRST_SCREEN_DRAWN, timeout=OPEN_WAIT_MS, polling=50)
    drawn = page.evaluate("performance.now()")
    loaded = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
    page.close()
    return drawn, loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datapoints", type=int, default=250)
    parser.add_argument("--opens", type=int, default=5)
    parser.add_argument("--clicks", type=int, default=3, help="Export button clicks timed in each viewer")
    parser.add_argument("--baseline", help="another checkout whose export is measured alongside")
    parser.add_argument("--segmentation-run", help="a run of the segmentation example (trained as configured) whose "
                                                   "first --segmentation-datapoints are exported too, in the same run")
    parser.add_argument("--segmentation-datapoints", type=int, default=25)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        roots = {"this checkout": REPO_ROOT, **({"baseline": os.path.abspath(args.baseline)} if args.baseline else {})}
        examples = [("default example", train_example(folder, args.datapoints), args.datapoints)]
        if args.segmentation_run:
            examples.append(("segmentation example", os.path.abspath(args.segmentation_run),
                             args.segmentation_datapoints))
        for example, run, datapoints in examples:
            measure(browser, folder, roots, example, run, datapoints, args.opens)
            for name, times in button_seconds(roots, run, datapoints, args.clicks).items():
                print(f"{name:<14} Export button: answered in median {statistics.median(times):6.1f} s "
                      f"(max {max(times):.1f} s, n={args.clicks}; load {os.getloadavg()[0]:.1f})")
        browser.close()


def measure(browser, folder: str, roots: dict[str, str], example: str, run: str, datapoints: int, opens: int) -> None:
    """Each checkout's report of ``run``'s first ``datapoints``: written, then opened alternately."""
    reports = {name: os.path.join(folder, f"report_{example.split()[0]}_{i}.html") for i, name in enumerate(roots)}
    written = {name: write_report(root, run, datapoints, reports[name]) for name, root in roots.items()}
    opened: dict[str, list[tuple[float, float]]] = {name: [] for name in roots}
    for round_ in range(opens):
        for name in list(roots) if round_ % 2 == 0 else list(roots)[::-1]:
            opened[name].append(open_ms(browser, reports[name]))
    print(f"report of {datapoints} datapoints of the {example}; load {os.getloadavg()[0]:.1f}")
    for name in roots:
        drawn = statistics.median(d for d, _ in opened[name])
        loaded = statistics.median(loaded for _, loaded in opened[name])
        print(f"{name:<14} {os.path.getsize(reports[name]) / 2**20:6.1f} MB  written in {written[name]:6.1f} s  "
              f"first screen drawn: median {drawn:8.0f} ms, load event {loaded:8.0f} ms (n={opens})")

if __name__ == "__main__":
    main()
