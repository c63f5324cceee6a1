"""Eval viewer in a real headless Chromium: page load, click to Debug Outputs drawn, switching a 1M-datapoint run.

Four runs in a temporary folder: the default example (``configs/examples/cnn_trainer.py``),
the all-debuggers example (``configs/examples/all_debuggers_trainer.py``), each trained
as configured unless ``--quick`` shrinks their datasets, and two synthetic runs of two
epochs with 1,000,000 and 10,000 datapoints each (epoch tables and scores files written
directly; the viewer reads only the page of rows it shows). The viewer is served on 127.0.0.1 and
driven by Chromium through playwright; every time is taken in the browser's own clock,
from the user's action to what the user waits for being on screen.

- page load: navigation start to the table's first rows and the score grid drawn
  (``performance.now()`` when both are there); target ≤ 1.5 s (default example). The table has its thumbnail
  column (the example captures its inputs); the thumbnails are asked once the rows are shown, so they are not
  part of the page load: navigation start to every drawn row's thumbnail decoded is reported beside it.
- click → Debug Outputs drawn: a click on the next table row (``j``) to its title and its Debug Outputs
  figures on screen drawn (maps drawn as pictures decoded, plotly graphs drawn; the viewer draws a graph below
  the fold when it is scrolled to); targets ≤ 300 ms median (default), ≤ 600 ms (all debuggers).
- switching epoch or run: choosing the other epoch of a run, or the other run, to the table showing its
  rows; target ≤ 1 s on a 1M-datapoint run, the same as on a 10k-datapoint one (both measured, interleaved).

    python -m benchmarks.viewer_browser [--quick] [--clicks 20] [--loads 5] [--rows 1000000] [--switches 6]
        [--baseline DIR]

``--baseline DIR`` also serves the viewer of another checkout (e.g. ``main`` before a change) over the same
examples and interleaves its page loads and clicks with this checkout's (side by side under the same load); both
are then served by processes of their own (``python -m runners.eval_viewer``), alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
from contextlib import ExitStack

import numpy as np

from analysis.epoch_table import EPOCH_TABLE_FILE, write_epoch_table
from runners.config_file import load_config
from runners.eval_viewer.app import create_app
from runners.eval_viewer.layout import ids
from runners.trainers import BaseTrainer
from tests.reliability.viewer_server import viewer_process

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The score grid drawn: by the page's script, or as a plotly heatmap in a --baseline checkout from before that.
GRID_DRAWN = ", ".join(f"#{ids.SCORE_GRID}{drawn}" for drawn in ("[data-drawn] canvas", " .heatmaplayer image", " .hm"))
FIRST_IDX = f"#{ids.TABLE} .ag-center-cols-container .ag-row[row-index='0'] [col-id='idx']"
# The table's first row with its data (AG Grid shows an empty row while its rows are asked for), and the grid drawn.
SHOWN = f"""() => (document.querySelector("{FIRST_IDX}") || {{}}).textContent > ''
    && document.querySelector('{GRID_DRAWN}')"""


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
    run = os.path.join(folder, f"synthetic_{rows}")
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


THUMBNAILS = f"""() => {{ const pictures = [...document.querySelectorAll('#{ids.TABLE} img.thumbnail')];
    return pictures.length > 0 && pictures.every(img => img.complete && img.naturalWidth > 0); }}"""


def page_load_ms(browser, url: str, wait_for: str = SHOWN) -> float:
    """Navigation start to ``wait_for`` holding (by default: the table's rows and the grid drawn)."""
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.goto(url)
    page.wait_for_function(wait_for, timeout=60_000)
    elapsed = page.evaluate("performance.now()")
    page.close()
    return elapsed


def page_loads_ms(browser, urls: dict[str, str], loads: int) -> dict[str, list[float]]:
    """``loads`` page loads of each URL, interleaved (the order alternates round by round)."""
    times: dict[str, list[float]] = {name: [] for name in urls}
    for round_ in range(loads):
        for name in (list(urls) if round_ % 2 == 0 else list(urls)[::-1]):
            times[name].append(page_load_ms(browser, urls[name]))
    return times


def clicks_ms(browser, urls: dict[str, str], clicks: int, blocks: int = 3) -> dict[str, list[float]]:
    """``clicks`` of each URL (``click_ms``), in ``blocks`` interleaved blocks (the order alternates)."""
    times: dict[str, list[float]] = {name: [] for name in urls}
    for block in range(blocks):
        for name in (list(urls) if block % 2 == 0 else list(urls)[::-1]):
            times[name] += click_ms(browser, urls[name], clicks // blocks + (block < clicks % blocks))
    return times


def click_ms(browser, url: str, clicks: int) -> list[float]:
    """Open the first row, then ``j`` through the table; each time from the key press (in the page's clock)
    to the new datapoint's title and every Debug Outputs figure drawn."""
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.goto(url)
    page.wait_for_function(SHOWN, timeout=60_000)
    page.locator(FIRST_IDX).click()
    page.wait_for_selector(f"#{ids.DATAPOINT_PANEL} .section-debug-outputs .debugger-block", timeout=60_000)
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
                // the graphs on screen drawn (the viewer draws a graph below the fold when it is scrolled to; a
                // --baseline checkout from before that draws every graph at once: the same rule), and the maps drawn
                // as pictures decoded
                const onScreen = (node) => node.getBoundingClientRect().top < window.innerHeight;
                const graphs = [...section.querySelectorAll('.dash-graph, .lazy-graph')];
                const pictures = [...section.querySelectorAll('.picture-figure img')];
                return graphs.length + pictures.length > 0
                    && graphs.every(g => g.querySelector('.main-svg') || !onScreen(g))
                    && pictures.every(img => img.complete && img.naturalWidth > 0);
            }""", arg=[ids.DATAPOINT_PANEL, before], timeout=60_000)
        times.append(page.evaluate("performance.now()") - start)
    page.close()
    return times


def switch_ms(browser, url: str, runs: dict[str, int], switches: int) -> dict[str, list[float]]:
    """Interleaved: switch between the runs and the epoch of each; each from the click on the option to the
    table showing the first row of what was chosen (its caption names the epoch and the size)."""
    first = next(iter(runs))
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.goto(f"{url}?run={first}&epoch=epoch_1")
    page.wait_for_function(SHOWN, timeout=60_000)
    times: dict[str, list[float]] = {}
    current = first
    for _ in range(switches):  # a run opens on its latest epoch (1): each epoch switch is 1 -> 0
        for run, rows in runs.items():
            if run != current:
                times.setdefault(f"switch run, to the {rows:,}-datapoint run", []).append(
                    _choose(page, ids.RUN_SELECT, f"{os.path.basename(run)} (trainer)", f"epoch 1: {rows} "))
                current = run
            times.setdefault(f"switch epoch, {rows:,}-datapoint run", []).append(
                _choose(page, ids.EPOCH_SELECT, "epoch 0", f"epoch 0: {rows} "))
    page.close()
    return times


def _choose(page, dropdown: str, option: str, caption: str) -> float:
    page.click(f"#{dropdown}")
    choice = page.get_by_role("option", name=option, exact=True)
    start = page.evaluate("performance.now()")
    choice.click()
    page.wait_for_function(
        """([caption, table, text]) => {
            const shown = document.querySelector('#' + caption);
            return shown && shown.innerText.startsWith(text) && document.querySelector(
                '#' + table + ' .ag-center-cols-container .ag-row[row-index="0"] [col-id="idx"]');
        }""", arg=[ids.TABLE_CAPTION, ids.TABLE, caption], timeout=60_000)
    return page.evaluate("performance.now()") - start


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
    parser.add_argument("--small-rows", type=int, default=10_000)
    parser.add_argument("--switches", type=int, default=6)
    parser.add_argument("--baseline", help="another checkout whose viewer's page loads and clicks are measured "
                                           "alongside")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder:
        default = train_example("cnn_trainer", folder, args.quick)
        everything = train_example("all_debuggers_trainer", folder, args.quick)
        large = {write_large_run(folder, rows): rows for rows in (args.rows, args.small_rows)}
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for name, run, target in (("default example", default, 300), ("all-debuggers example", everything, 600)):
                with ExitStack() as stack:
                    if args.baseline:  # both viewers in processes of their own, alike
                        urls = {f"{name}, {label}": stack.enter_context(
                            viewer_process(["--log-dirs", run], cwd=root))[0] + "/"
                            for label, root in (("this checkout", REPO_ROOT), ("baseline", args.baseline))}
                    else:
                        server, url = serve([run])
                        stack.callback(server.shutdown)
                        urls = {name: url}
                    for warm_up in urls.values():  # Python imports, the first dataset and page reads
                        page_load_ms(browser, warm_up)
                    if name == "default example":
                        for what, times in page_loads_ms(browser, urls, args.loads).items():
                            report(f"page load to interactive, {what}", times, 1500)
                        thumbnails = [page_load_ms(browser, next(iter(urls.values())), THUMBNAILS)
                                      for _ in range(args.loads)]
                        print(f"{'  then the visible rows thumbnails drawn':<52} median "
                              f"{statistics.median(thumbnails):7.0f} ms (from navigation start; n={args.loads})")
                    for what, times in clicks_ms(browser, urls, args.clicks).items():
                        report(f"click → Debug Outputs drawn, {what}", times, target)
            server, url = serve(list(large))
            for what, times in switch_ms(browser, url, large, args.switches).items():
                report(what, times, 1000)
            server.shutdown()
            browser.close()


if __name__ == "__main__":
    main()
