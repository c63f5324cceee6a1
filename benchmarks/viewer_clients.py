"""Twenty clients opening the viewer at once on a 20,000-datapoint run: errors, and how long each waits.

A trained run (the tests' tiny CNN, a Grad-CAM and a custom debugger, ``--datapoints`` validation datapoints, its
inputs captured, so the table has its thumbnail column) is served by ``python -m runners.eval_viewer`` in a
process of its own. Each round, ``--clients`` clients start together (a barrier) and each does over HTTP what a
page asks of the server when it opens, in order: the page, its layout and callbacks, the table's first 100 rows
(``open``: the table is usable), the pictures of the rows it shows (``thumbnails``), then a datapoint (``click``:
its panel). Meanwhile a real headless Chromium opens the page (navigation start to the table's rows and the
grid drawn, as ``benchmarks/viewer_browser.py`` measures a page load), so the browser's figure is taken under
the same load. Target: no error, p95 of ``open`` ≤ 2 s.

    python -m benchmarks.viewer_clients [--datapoints 20000] [--clients 20] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from typing import Any, Optional

from benchmarks.viewer_browser import CHROMIUM, CHROMIUM_ARGS, REPO_ROOT, SHOWN
from runners.eval_viewer.layout import ids
from runners.eval_viewer.layout.pictures import THUMBNAIL_COLUMN
from tests.e2e.conftest import DEBUGGER
from tests.reliability.viewer_server import call_callback, viewer_process
from tests.runs import train, write_config

WAIT_S = 120  # a way out for a request that never comes back, not how long one takes
SHOWN_ROWS = 15  # rows a 420 px table shows: the thumbnails a page asks for first


def trained_run(folder: str, datapoints: int) -> str:
    from pathlib import Path

    root = Path(folder)
    (root / "configs").mkdir()
    return train(write_config(root / "configs" / "run.py", root / "logs" / "run", epochs=1, train_size=64,
                              val_size=datapoints, val_batch=250, extra=DEBUGGER))


def find(component: Any, wanted: str) -> Optional[dict]:
    """The props of the component with id ``wanted`` in a layout (Dash's JSON of it)."""
    if isinstance(component, dict):
        props = component.get("props", {})
        if props.get("id") == wanted:
            return props
        return next((found for child in component.values() if (found := find(child, wanted)) is not None), None)
    if isinstance(component, list):
        return next((found for child in component if (found := find(child, wanted)) is not None), None)
    return None


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=WAIT_S) as response:
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}")
        return response.read()


def one_client(url: str, times: dict[str, list[float]], errors: list[str], barrier: threading.Barrier) -> None:
    """What a page asks of the server when it opens, then a click; each step's time since the client began."""
    barrier.wait()
    start = time.perf_counter()
    try:
        get(f"{url}/")
        layout = json.loads(get(f"{url}/_dash-layout"))
        get(f"{url}/_dash-dependencies")
        query = find(layout, ids.TABLE_QUERY)["data"]
        request = {"startRow": 0, "endRow": 100, "sortModel": [], "filterModel": {}}
        status, body = call_callback(url, f"{ids.TABLE}.getRowsResponse", {
            f"{ids.TABLE}.getRowsRequest": request, f"{ids.TABLE_QUERY}.data": query}, timeout=WAIT_S)
        if status != 200:
            raise RuntimeError(f"rows: HTTP {status}")
        rows = json.loads(body)["response"][ids.TABLE]["getRowsResponse"]["rowData"]
        times["open"].append(time.perf_counter() - start)
        column = next(c for c in find(layout, ids.TABLE)["columnDefs"] if c.get("colId") == THUMBNAIL_COLUMN)
        params = column["cellRendererParams"]
        for row in rows[:SHOWN_ROWS]:
            get(f"{url}/{params['path']}?" + urllib.parse.urlencode({"run": params["run"], "idx": row["idx"],
                                                                     "v": params["version"]}))
        times["thumbnails"].append(time.perf_counter() - start)
        clicked = time.perf_counter()
        status, _ = call_callback(url, f"{ids.DATAPOINT_PANEL}.children", {
            f"{ids.SELECTED}.data": rows[0]["idx"], f"{ids.RUN_SELECT}.value": query["run"],
            f"{ids.EPOCH_SELECT}.value": query["epoch"], f"{ids.TABS}.value": ids.TAB_DATAPOINT,
            f"{ids.TABLE_QUERY}.data": query, f"{ids.TABLE}.getRowsRequest": request}, timeout=WAIT_S)
        if status != 200:
            raise RuntimeError(f"datapoint: HTTP {status}")
        times["click"].append(time.perf_counter() - clicked)
    except Exception as exc:  # counted and reported: the target is no error at all
        errors.append(f"{type(exc).__name__}: {exc}")


def browser_open_ms(browser, url: str) -> float:
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.goto(url, timeout=WAIT_S * 1000)
    page.wait_for_function(SHOWN, timeout=WAIT_S * 1000)
    elapsed = page.evaluate("performance.now()")
    page.close()
    return elapsed


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datapoints", type=int, default=20_000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder:
        run = trained_run(folder, args.datapoints)
        times: dict[str, list[float]] = {"open": [], "thumbnails": [], "click": []}
        browser_times, errors = [], []
        with viewer_process(["--log-dirs", run], cwd=REPO_ROOT) as (url, _), sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            browser_open_ms(browser, url)  # warm-up: imports, the epoch's table and pages opened once
            for _ in range(args.rounds):
                barrier = threading.Barrier(args.clients + 1)
                clients = [threading.Thread(target=one_client, args=(url, times, errors, barrier))
                           for _ in range(args.clients)]
                for client in clients:
                    client.start()
                barrier.wait()
                browser_times.append(browser_open_ms(browser, url))
                for client in clients:
                    client.join(WAIT_S * 3)
            browser.close()
        print(f"{args.clients} clients x {args.rounds} rounds on a {args.datapoints:,}-datapoint run; "
              f"load {os.getloadavg()[0]:.1f}; errors: {len(errors)} {sorted(set(errors))[:3]}")
        for what, values in times.items():
            if values:
                print(f"{what:<11} p50 {statistics.median(values) * 1000:7.0f} ms  p95 "
                      f"{percentile(values, 0.95) * 1000:7.0f} ms  max {max(values) * 1000:7.0f} ms  (n={len(values)})"
                      + ("  target p95 ≤ 2000 ms" if what == "open" else ""))
        print(f"browser page load during the burst: median {statistics.median(browser_times):.0f} ms "
              f"(n={len(browser_times)}), target ≤ 1500 ms")


if __name__ == "__main__":
    main()
