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
- j → next datapoint drawn: the same, by the key ``j``; target ≤ 300 ms (default example).
- where a j's time goes (``phases``): from the key to the panel's request sent, its answer in from the network, the
  new panel in the page and drawn; medians.
- Compare epochs drawn: with a datapoint open, a click on the tab to its columns on screen drawn (≤ 1.5 s), and to
  the page done with it (its last long task: until then the page is slow to scroll or click).
- Failures tab: a click on the tab to its findings listed, the epoch's analysis kept by the server (≤ 1 s).
- switching epoch or run: choosing the other epoch of a run, or the other run, to the table showing its
  rows; target ≤ 1 s on a 1M-datapoint run, the same as on a 10k-datapoint one (both measured, interleaved).
- 20 parallel clients on a 20k-datapoint run: each opens 5 random datapoints as a page does (the layout for the
  address, the table's first rows, the thumbnails of the 15 rows it shows, one after another, and the datapoint's
  panel) over HTTP, all at once; no error, p95 ≤ 2 s. The run's inputs are captured (random 16 x 16 images), so
  its table has the thumbnail column. The viewer runs as users run it, ``python -m runners.eval_viewer`` in its
  own process (the clients' threads would otherwise share its interpreter), and each client reads the app's
  callbacks once, as a page does.

    python -m benchmarks.viewer_browser [--quick] [--clicks 20] [--loads 5] [--compares 5] [--rows 1000000]
        [--switches 6] [--clients 20] [--only load click j phases compare failures switch parallel] [--baseline DIR]
        [--segmentation-run DIR]

``--segmentation-run DIR`` (a run of ``configs/examples/promptable_segmentation_trainer.py``, trained as configured:
it takes minutes) measures click, j and Compare epochs on it too, after the two examples in the same run (targets:
click ≤ 300 ms, j ≤ 200 ms).

``--baseline DIR`` also serves the viewer of another checkout (e.g. ``main`` before a change) over the same
examples and interleaves its page loads, clicks and comparisons with this checkout's (side by side under the same
load); both are then served by processes of their own (``python -m runners.eval_viewer``), alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from contextlib import ExitStack
from typing import Optional

import numpy as np
import torch

from analysis.epoch_table import write_epoch_table
from run_dir.names import DATAPOINTS_DIR, EPOCH_TABLE_FILE, RUN_INFO_FILE, VALIDATION_SCORES_FILE, epoch_dir_name
from runners.config_file import load_config
from runners.datapoint_capture import CaptureLimits, DatapointCapture
from runners.eval_viewer.app import create_app
from runners.eval_viewer.compare_epochs.ids import COMPARE_EPOCHS_PANEL, COMPARE_EPOCHS_STATUS, TAB_COMPARE_EPOCHS
from runners.eval_viewer.controls.ids import EPOCH_SELECT, RUN_SELECT
from runners.eval_viewer.datapoint.ids import DATAPOINT_PANEL, TAB_DATAPOINT
from runners.eval_viewer.pictures.ids import PICTURE_PATH
from runners.eval_viewer.pictures.view import version_tag
from runners.eval_viewer.scores.ids import SCORE_GRID
from runners.eval_viewer.shared.ids import SELECTED, TABS
from runners.eval_viewer.table.ids import TABLE, TABLE_CAPTION, TABLE_QUERY
from runners.trainers import BaseTrainer
from tests.reliability.viewer_server import viewer_process

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The score grid drawn: by the page's script, or as a plotly heatmap in a --baseline checkout from before that.
GRID_DRAWN = ", ".join(f"#{SCORE_GRID}{drawn}" for drawn in ("[data-drawn] canvas", " .heatmaplayer image", " .hm"))
FIRST_IDX = f"#{TABLE} .ag-center-cols-container .ag-row[row-index='0'] [col-id='idx']"
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


def write_large_run(folder: str, rows: int, pictures: bool = False) -> str:
    """Two epochs of ``rows`` datapoints: epoch table and scores file, as a trainer writes them; with ``pictures``
    their inputs too (random 16 x 16 images, captured as a run captures them)."""
    run = os.path.join(folder, f"synthetic_{rows}")
    os.makedirs(run)
    with open(os.path.join(run, RUN_INFO_FILE), "w") as f:
        json.dump({"runner": "BaseTrainer"}, f)
    rng = np.random.default_rng(0)
    for epoch in range(2):
        epoch_dir = os.path.join(run, epoch_dir_name(epoch))
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
        with open(os.path.join(epoch_dir, VALIDATION_SCORES_FILE), "w") as f:
            json.dump(scores, f)
    if pictures:
        capture_images(run, rows, rng)
    return run


def capture_images(run: str, rows: int, rng: np.random.Generator, batch: int = 500) -> None:
    """Random 16 x 16 RGB inputs of idx 0..rows-1, written to the run's captured datapoints by the run's own capture."""
    import logging

    capture = DatapointCapture(os.path.join(run, DATAPOINTS_DIR), CaptureLimits(), logging.getLogger(__name__))
    for start in range(0, rows, batch):
        idx = torch.arange(start, min(start + batch, rows))
        capture.add_batch({"inputs": {"image": torch.as_tensor(rng.random((len(idx), 3, 16, 16)), dtype=torch.float32)},
                           "labels": {"class": idx % 6}, "meta_info": {"idx": idx}})
    capture.finish()


def serve(log_dirs: list[str]):
    import logging

    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = make_server("127.0.0.1", 0, create_app(log_dirs).server, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}/"


THUMBNAILS = f"""() => {{ const pictures = [...document.querySelectorAll('#{TABLE} img.thumbnail')];
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


def interleaved(urls: dict[str, str], count: int, measure, blocks: int = 3) -> dict[str, list]:
    """``count`` times of each URL, ``measure(url, n)`` giving ``n`` of them, in ``blocks`` interleaved blocks (the
    order alternates), so that both viewers of a ``--baseline`` run meet the same load."""
    times: dict[str, list] = {name: [] for name in urls}
    for block in range(blocks):
        for name in (list(urls) if block % 2 == 0 else list(urls)[::-1]):
            times[name] += measure(urls[name], count // blocks + (block < count % blocks))
    return times


# Figures on screen drawn in ``section``: the graphs on screen (the viewer draws a graph below the fold when it is
# scrolled to; a --baseline checkout from before that draws every graph at once: the same rule), and the maps drawn
# as pictures decoded.
DRAWN = """section => {
    const onScreen = (node) => node.getBoundingClientRect().top < window.innerHeight;
    const graphs = [...section.querySelectorAll('.dash-graph, .lazy-graph')];
    const pictures = [...section.querySelectorAll('.picture-figure img')];
    return graphs.length + pictures.length > 0
        && graphs.every(g => g.querySelector('.main-svg') || !onScreen(g))
        && pictures.every(img => img.complete && img.naturalWidth > 0);
}"""


# When the user's key or button went down, in the page's clock (before any handler of the page's own runs).
INPUT_TIME = """['keydown', 'mousedown'].forEach((type) => window.addEventListener(type, () => {
    window.lanternInput = performance.now(); }, true));"""


# Where a j's time goes: the panel's request sent (its fetch called) and the new panel in the page (its title's text
# changed; read as text, which lays nothing out), in the page's clock.
PHASE_MARKS = """window.lanternPhases = {};
const lanternFetch = window.fetch;
window.fetch = function (url, options) {
    if (options && String(options.body || '').includes('PANEL.children')) {
        window.lanternPhases.sent = performance.now();
    }
    return lanternFetch.apply(this, arguments);
};
document.addEventListener('DOMContentLoaded', () => new MutationObserver(() => {
    const title = document.querySelector('#PANEL .datapoint-title');
    const phases = window.lanternPhases;
    if (title && phases.before !== undefined && !phases.shown && title.textContent !== phases.before) {
        phases.shown = performance.now();
    }
}).observe(document.body, {childList: true, subtree: true, characterData: true}));""".replace("PANEL", DATAPOINT_PANEL)
# The panel's answer in from the network (its request's resource timing), in the page's clock.
ANSWERED = """(sent) => Math.max(0, ...performance.getEntriesByType('resource')
    .filter((e) => e.name.includes('_dash-update-component') && Math.abs(e.startTime - sent) < 5)
    .map((e) => e.responseEnd))"""
PHASES = ("request sent", "answer in", "panel in the page", "drawn")


def click_ms(browser, url: str, clicks: int, key: bool = True, phases: Optional[dict[str, list]] = None
             ) -> list[float]:
    """Open the first row, then the next row each time, by ``j`` (``key``) or a click on it; each time from the key
    or mouse button going down to the frame that draws the new datapoint's title and every Debug Outputs figure, both
    in the page's clock (the check runs before each frame is painted): the driver's round trips to the page are not
    part of it. ``phases``: each time's ``PHASES`` from the key are appended to it."""
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.add_init_script(INPUT_TIME)
    if phases is not None:
        page.add_init_script(PHASE_MARKS)
    page.goto(url)
    page.wait_for_function(SHOWN, timeout=60_000)
    page.locator(FIRST_IDX).click()
    page.wait_for_selector(f"#{DATAPOINT_PANEL} .section-debug-outputs .debugger-block", timeout=60_000)
    times = []
    for row in range(1, clicks + 1):
        before = page.locator(f"#{DATAPOINT_PANEL} .datapoint-title").inner_text()
        target = page.locator(f"#{TABLE} .ag-center-cols-container .ag-row[row-index='{row}'] [col-id='idx']")
        if not key:
            target.scroll_into_view_if_needed()
        page.evaluate("(before) => { window.lanternInput = window.lanternDrawn = null; "
                      "window.lanternPhases = {before: before}; }", before)
        page.keyboard.press("j") if key else target.click()
        page.wait_for_function(
            """([panel, before]) => {
                const title = document.querySelector('#' + panel + ' .datapoint-title');
                const section = document.querySelector('#' + panel + ' .section-debug-outputs');
                const drawn = title && title.innerText !== before && section && (DRAWN)(section);
                if (drawn) { window.lanternDrawn = performance.now(); }
                return drawn;
            }""".replace("DRAWN", DRAWN), arg=[DATAPOINT_PANEL, before], timeout=60_000, polling="raf")
        times.append(page.evaluate("window.lanternDrawn - window.lanternInput"))
        if phases is not None:
            marks = page.evaluate("window.lanternPhases")
            found = [marks.get("sent"), page.evaluate(ANSWERED, marks.get("sent", -1)), marks.get("shown"),
                     page.evaluate("window.lanternDrawn")]
            start = page.evaluate("window.lanternInput")
            for name, at in zip(PHASES, found):
                phases.setdefault(name, []).append(at - start if at else float("nan"))
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
                    _choose(page, RUN_SELECT, f"{os.path.basename(run)} (trainer)", f"epoch 1: {rows} "))
                current = run
            times.setdefault(f"switch epoch, {rows:,}-datapoint run", []).append(
                _choose(page, EPOCH_SELECT, "epoch 0", f"epoch 0: {rows} "))
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
        }""", arg=[TABLE_CAPTION, TABLE, caption], timeout=60_000)
    return page.evaluate("performance.now()") - start


# The end of the page's last long task (a task of the main thread over 50 ms: drawing a graph, a layout), in its clock.
LONG_TASKS = """new PerformanceObserver((list) => list.getEntries().forEach((task) => {
    window.lanternLastLongTask = Math.max(window.lanternLastLongTask || 0, task.startTime + task.duration); }))
    .observe({type: 'longtask'});"""
QUIET_MS = 1000  # no long task for this long: the page has done what the click started


def compare_ms(browser, url: str, times: int) -> list[tuple[float, float]]:
    """With a datapoint open, a click on Compare epochs to its columns drawn for that datapoint (status line empty,
    its figures on screen drawn, ``DRAWN``), and to the page done with it (the end of the last long task before
    ``QUIET_MS`` without one: until then scrolling and clicks wait, e.g. for plotly drawing graphs below the fold);
    then back to the Datapoint tab and ``j``, so each comparison is of a new datapoint."""
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.add_init_script(LONG_TASKS)
    page.goto(url)
    page.wait_for_function(SHOWN, timeout=60_000)
    page.locator(FIRST_IDX).click()
    found = []
    for _ in range(times):
        title = page.locator(f"#{DATAPOINT_PANEL} .datapoint-title")
        title.wait_for(timeout=60_000)
        idx = title.inner_text().split()[1]
        start = page.evaluate("performance.now()")
        page.click(f"#{TAB_COMPARE_EPOCHS}")
        page.wait_for_function(
            """([panel, status, idx]) => {
                const title = document.querySelector('#' + panel + ' .datapoint-title');
                return title && title.innerText.startsWith('datapoint ' + idx + ' ')
                    && document.getElementById(status).innerText === ''
                    && (DRAWN)(document.getElementById(panel));
            }""".replace("DRAWN", DRAWN), arg=[COMPARE_EPOCHS_PANEL, COMPARE_EPOCHS_STATUS, idx],
            timeout=60_000)
        drawn = page.evaluate("performance.now()")
        page.wait_for_function(f"() => performance.now() - Math.max(window.lanternLastLongTask || 0, {drawn}) "
                               f"> {QUIET_MS}", timeout=60_000)
        done = max(drawn, page.evaluate("window.lanternLastLongTask || 0"))
        found.append((drawn - start, done - start))
        page.click(f"#{TAB_DATAPOINT}")
        page.keyboard.press("j")
        page.wait_for_function(f"() => !document.querySelector('#{DATAPOINT_PANEL} .datapoint-title')"
                               f".innerText.startsWith('datapoint {idx} ')", timeout=60_000)
    page.close()
    return found


def failures_ms(browser, url: str, times: int) -> list[float]:
    """A fresh page each time: a click on the Failures tab to its findings listed (the analysis of the epoch is
    computed once by the server and kept: the first time, untimed, warms it)."""
    found = []
    for attempt in range(times + 1):
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.goto(url)
        page.wait_for_function(SHOWN, timeout=60_000)
        start = page.evaluate("performance.now()")
        page.click("#tab-failures")
        page.locator("#failures-panel .finding-button, #failures-panel .hint").first.wait_for(timeout=300_000)
        if attempt:
            found.append(page.evaluate("performance.now()") - start)
        page.close()
    return found


def parallel_open_ms(url: str, run: str, rows: int, clients: int, opens: int) -> tuple[list[float], int]:
    """``clients`` threads, each opening ``opens`` random datapoints of ``run`` as a page does (the layout built for
    the address, the table's first rows, their thumbnails, the datapoint's panel), all at once; the time of each
    open and the number of failed requests. Like a page, each client reads the app's callbacks once."""
    import random
    import urllib.request

    from tests.reliability.viewer_server import dependencies, post_callback

    times: list[float] = []
    errors = [0]
    lock = threading.Lock()
    query = {"run": run, "epoch": epoch_dir_name(1), "metric": "cross_entropy", "version": None, "idx": None}
    tag = version_tag(None)
    base = url.rstrip("/")

    def client(seed: int) -> None:
        generator = random.Random(seed)
        callbacks = {c["output"]: c for c in dependencies(base, timeout=60)}
        table = next(c for name, c in callbacks.items() if f"{TABLE}.getRowsResponse" in name)
        panel = next(c for name, c in callbacks.items() if f"{DATAPOINT_PANEL}.children" in name)
        for _ in range(opens):
            idx = generator.randrange(rows)
            start = time.perf_counter()
            request = urllib.request.Request(f"{url}_dash-layout",
                                             headers={"Referer": f"{url}?run={run}&epoch=epoch_1&idx={idx}"})
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    response.read()
                status, body = post_callback(base, table, {
                    f"{TABLE}.getRowsRequest": {"startRow": 0, "endRow": 100}, f"{TABLE_QUERY}.data": query},
                    timeout=60)
                statuses = [status, *thumbnail_statuses(url, run, body, tag)]
                statuses.append(post_callback(base, panel, {
                    f"{SELECTED}.data": idx, f"{RUN_SELECT}.value": run,
                    f"{EPOCH_SELECT}.value": epoch_dir_name(1), f"{TABS}.value": TAB_DATAPOINT}, timeout=60)[0])
            except OSError:
                statuses = [0]
            with lock:
                times.append((time.perf_counter() - start) * 1000)
                errors[0] += sum(status != 200 for status in statuses)

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return times, errors[0]


def thumbnail_statuses(url: str, run: str, rows_answer: str, tag: str, shown: int = 15) -> list[int]:
    """The statuses of the thumbnails of the first ``shown`` rows of a rows answer, fetched one after another (a
    page asks for the rows it draws)."""
    import urllib.error
    import urllib.parse
    import urllib.request

    rows = json.loads(rows_answer)["response"][TABLE]["getRowsResponse"]["rowData"]
    statuses = []
    for row in rows[:shown]:
        address = f"{url}{PICTURE_PATH}?" + urllib.parse.urlencode({"run": run, "idx": row["idx"], "v": tag})
        try:
            with urllib.request.urlopen(address, timeout=60) as response:
                response.read()
                statuses.append(response.status)
        except urllib.error.HTTPError as exc:
            statuses.append(exc.code)
    return statuses


def report(what: str, times: list[float], target: float) -> None:
    median = statistics.median(times)
    print(f"{what:<52} median {median:7.0f} ms  max {max(times):7.0f} ms  target ≤ {target:.0f} ms  "
          f"(n={len(times)}) {'ok' if median <= target else 'MISSED'}")


MEASURES = ("load", "click", "j", "phases", "compare", "failures", "switch", "parallel")
J_TARGETS = {"default example": 300, "segmentation example": 200}  # ms; 600 for the all-debuggers example


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shrink the examples' datasets (a smoke run)")
    parser.add_argument("--clicks", type=int, default=20)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--compares", type=int, default=5)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--small-rows", type=int, default=10_000)
    parser.add_argument("--switches", type=int, default=6)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--client-rows", type=int, default=20_000)
    parser.add_argument("--only", nargs="+", choices=MEASURES, default=list(MEASURES), help="what to measure")
    parser.add_argument("--baseline", help="another checkout whose viewer's page loads and clicks are measured "
                                           "alongside")
    parser.add_argument("--segmentation-run", help="a run of the segmentation example (trained as configured) whose "
                                                   "clicks, j and Compare epochs are measured too, in the same run")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        if {"load", "click", "j", "phases", "compare", "failures"} & set(args.only):
            examples(browser, folder, args)
        if "switch" in args.only:
            large = {write_large_run(folder, rows): rows for rows in (args.rows, args.small_rows)}
            server, url = serve(list(large))
            for what, times in switch_ms(browser, url, large, args.switches).items():
                report(what, times, 1000)
            server.shutdown()
        if "parallel" in args.only:
            run = write_large_run(folder, args.client_rows, pictures=True)
            with viewer_process(["--log-dirs", run], cwd=REPO_ROOT) as (url, _):  # as users serve it, clients apart
                times, errors = parallel_open_ms(url + "/", run, args.client_rows, args.clients, 5)
            p95 = float(np.percentile(times, 95))
            print(f"{args.clients} parallel clients, {args.client_rows:,}-datapoint run: {len(times)} opens, "
                  f"{errors} failed requests, median {statistics.median(times):.0f} ms, p95 {p95:.0f} ms "
                  f"(target: no error, p95 ≤ 2000 ms) {'ok' if not errors and p95 <= 2000 else 'MISSED'}")
        browser.close()


def examples(browser, folder: str, args: argparse.Namespace) -> None:
    """Page load, click and j → Debug Outputs drawn, Compare epochs and the Failures tab on the two examples."""
    default = train_example("cnn_trainer", folder, args.quick)
    everything = train_example("all_debuggers_trainer", folder, args.quick)
    runs = [("default example", default, 300), ("all-debuggers example", everything, 600)]
    if args.segmentation_run:  # its 1,200 datapoints with masks, attention and SAM2's states: targets of their own
        runs.append(("segmentation example", os.path.abspath(args.segmentation_run), 300))
    for name, run, target in runs:
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
            if name == "default example" and "load" in args.only:
                for what, times in page_loads_ms(browser, urls, args.loads).items():
                    report(f"page load to interactive, {what}", times, 1500)
                thumbnails = [page_load_ms(browser, next(iter(urls.values())), THUMBNAILS) for _ in range(args.loads)]
                print(f"{'  then the visible rows thumbnails drawn':<52} median "
                      f"{statistics.median(thumbnails):7.0f} ms (from navigation start; n={args.loads})")
            if "click" in args.only:
                for what, times in interleaved(urls, args.clicks,
                                               lambda url, n: click_ms(browser, url, n, key=False)).items():
                    report(f"click → Debug Outputs drawn, {what}", times, target)
            if "j" in args.only:
                for what, times in interleaved(urls, args.clicks, lambda url, n: click_ms(browser, url, n)).items():
                    report(f"j → next datapoint drawn, {what}", times, J_TARGETS.get(name, 600))
            if "phases" in args.only:
                for what, url in urls.items():
                    found: dict[str, list] = {}
                    click_ms(browser, url, args.clicks, phases=found)
                    print(f"j, {what}: medians from the key (n={args.clicks}): " + ", ".join(
                        f"{name} {statistics.median(found[name]):.0f} ms" for name in PHASES))
            if "compare" in args.only:
                for what, times in interleaved(urls, args.compares, lambda url, n: compare_ms(browser, url, n)).items():
                    report(f"Compare epochs drawn, {what}", [drawn for drawn, _ in times], 1500)
                    report("  and the page done with it (no long task)", [done for _, done in times], 1500)
            this = next(iter(urls.values()))
            if "failures" in args.only and name == "default example":
                report(f"Failures tab, {name} (findings kept)", failures_ms(browser, this, args.compares), 1000)


if __name__ == "__main__":
    main()
