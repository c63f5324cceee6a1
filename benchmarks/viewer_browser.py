"""Eval viewer in a real headless Chromium: page load, click to Debug Outputs drawn, switching a 1M-datapoint run.

Three runs in a temporary folder: the default example (``configs/examples/cnn_trainer.py``),
the all-debuggers example (``configs/examples/all_debuggers_trainer.py``), each trained
as configured unless ``--quick`` shrinks their datasets, and a synthetic run of two
epochs with 1,000,000 datapoints each (its epoch table and scores file written directly;
the viewer reads only the page of rows it shows). The viewer is served on 127.0.0.1 and
driven by Chromium through playwright; every time is taken in the browser's own clock,
from the user's action to what the user waits for being on screen.

- page load: navigation start to the table's first rows and the score grid drawn
  (``performance.now()`` when both are there); target ≤ 1.5 s (default example).
- click → Debug Outputs drawn: a click on the next table row (``j``) to its title and all its
  Debug Outputs figures in the page; targets ≤ 300 ms median (default), ≤ 600 ms (all debuggers).
- switch epoch on the 1M run: choosing the other epoch to the table showing its rows; target ≤ 1 s.

    python -m benchmarks.viewer_browser [--quick] [--clicks 20] [--loads 5] [--rows 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading

import numpy as np

from analysis.epoch_table import EPOCH_TABLE_FILE, write_epoch_table
from runners.eval_viewer.app import create_app
from runners.eval_viewer.layout import ids
from runners.trainers import BaseTrainer
from utils.config_file import load_config

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHOWN = f"""() => document.querySelector('#{ids.TABLE} .ag-center-cols-container .ag-row[row-index="0"] [col-id="idx"]')
    && document.querySelector('#{ids.SCORE_GRID} .heatmaplayer image, #{ids.SCORE_GRID} .hm')"""


def train_example(name: str, folder: str, quick: bool) -> str:
    config = load_config(os.path.join(REPO_ROOT, "configs", "examples", f"{name}.py"))
    config["work_dir"] = os.path.join(folder, name)
    if quick:
        config["train_dataset"]["args"]["num_datapoints"] = 256
        config["val_dataset"]["args"]["num_datapoints"] = 64
    BaseTrainer(config).run()
    return config["work_dir"]


def write_large_run(folder: str, rows: int) -> str:
    """Two epochs of ``rows`` datapoints: epoch table and scores file, as a trainer writes them."""
    run = os.path.join(folder, "million")
    os.makedirs(run)
    with open(os.path.join(run, "run_info.json"), "w") as f:
        json.dump({"runner": "BaseTrainer"}, f)
    rng = np.random.default_rng(0)
    for epoch in range(2):
        epoch_dir = os.path.join(run, f"epoch_{epoch}")
        os.makedirs(epoch_dir)
        loss = rng.exponential(1.0, rows)
        label, prediction = rng.integers(0, 6, rows), rng.integers(0, 6, rows)
        names = np.array(["circle", "square", "triangle", "cross", "ring", "star"], dtype=object)
        columns = {"idx": np.arange(rows), "label": label, "prediction": prediction, "label_name": names[label],
                   "prediction_name": names[prediction], "accuracy": (label == prediction).astype(float),
                   "cross_entropy": loss, "scale": rng.random(rows)}
        roles = {"scores": ["accuracy", "cross_entropy"], "higher_is_better": {"accuracy": True,
                                                                               "cross_entropy": False},
                 "meta": ["scale"], "summaries": []}
        write_epoch_table(os.path.join(epoch_dir, EPOCH_TABLE_FILE), columns, roles)
        scores = {"aggregated": {"accuracy": float(columns["accuracy"].mean()), "cross_entropy": float(loss.mean())},
                  "per_datapoint": {"accuracy": columns["accuracy"].tolist(), "cross_entropy": loss.tolist()},
                  "datapoint_idx": list(range(rows)), "higher_is_better": roles["higher_is_better"]}
        with open(os.path.join(epoch_dir, "validation_scores.json"), "w") as f:
            json.dump(scores, f)
    return run


def serve(log_dirs: list[str]):
    import logging

    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = make_server("127.0.0.1", 0, create_app(log_dirs).server, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}/"


def page_load_ms(browser, url: str) -> float:
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.goto(url)
    page.wait_for_function(SHOWN, timeout=60_000)
    elapsed = page.evaluate("performance.now()")
    page.close()
    return elapsed


def click_ms(browser, url: str, clicks: int) -> list[float]:
    """Open the first row, then ``j`` through the table; each time from the key press (in the page's clock)
    to the new datapoint's title and every Debug Outputs figure drawn."""
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.goto(url)
    page.wait_for_function(SHOWN, timeout=60_000)
    page.locator(f"#{ids.TABLE} .ag-center-cols-container .ag-row[row-index='0'] [col-id='idx']").click()
    page.wait_for_selector(f"#{ids.DATAPOINT_PANEL} .section-debug-outputs .js-plotly-plot", timeout=60_000)
    times = []
    for _ in range(clicks):
        before = page.locator(f"#{ids.DATAPOINT_PANEL} .datapoint-title").inner_text()
        start = page.evaluate("performance.now()")
        page.keyboard.press("j")
        page.wait_for_function(
            """([panel, before]) => {
                const title = document.querySelector('#' + panel + ' .datapoint-title');
                const section = document.querySelector('#' + panel + ' .section-debug-outputs');
                if (!title || title.innerText === before || !section) { return false; }
                const graphs = section.querySelectorAll('.dash-graph');
                return graphs.length > 0 && [...graphs].every(g => g.querySelector('.main-svg'));
            }""", arg=[ids.DATAPOINT_PANEL, before], timeout=60_000)
        times.append(page.evaluate("performance.now()") - start)
    page.close()
    return times


def switch_ms(browser, url: str, switches: int) -> list[float]:
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.goto(url)
    page.wait_for_function(SHOWN, timeout=60_000)
    times = []
    for i in range(switches):
        target = f"epoch {i % 2}"
        page.click(f"#{ids.EPOCH_SELECT}")
        option = page.get_by_role("option", name=target, exact=True)
        start = page.evaluate("performance.now()")
        option.click()
        page.wait_for_function(
            """([caption, table, label]) => {
                const shown = document.querySelector('#' + caption);
                return shown && shown.innerText.startsWith(label + ': ') && document.querySelector(
                    '#' + table + ' .ag-center-cols-container .ag-row[row-index="0"] [col-id="idx"]');
            }""", arg=[ids.TABLE_CAPTION, ids.TABLE, target], timeout=60_000)
        times.append(page.evaluate("performance.now()") - start)
    page.close()
    return times


def report(what: str, times: list[float], target: float) -> None:
    median = statistics.median(times)
    print(f"{what:<52} median {median:7.0f} ms  max {max(times):7.0f} ms  target ≤ {target:.0f} ms  "
          f"(n={len(times)}) {'ok' if median <= target else 'MISSED'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shrink the examples' datasets (a smoke run)")
    parser.add_argument("--clicks", type=int, default=20)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder:
        default = train_example("cnn_trainer", folder, args.quick)
        everything = train_example("all_debuggers_trainer", folder, args.quick)
        large = write_large_run(folder, args.rows)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for name, run, target in (("default example", default, 300), ("all-debuggers example", everything, 600)):
                server, url = serve([run])
                page_load_ms(browser, url)  # warm-up: Python imports, the first dataset and page reads
                if name == "default example":
                    report("page load to interactive, default example",
                           [page_load_ms(browser, url) for _ in range(args.loads)], 1500)
                report(f"click → Debug Outputs drawn, {name}", click_ms(browser, url, args.clicks), target)
                server.shutdown()
            server, url = serve([large])
            report(f"switch epoch, {args.rows:,}-datapoint run", switch_ms(browser, url, 6), 1000)
            server.shutdown()
            browser.close()


if __name__ == "__main__":
    main()
