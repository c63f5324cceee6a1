"""The Embeddings tab in a real headless Chromium: a click on the tab to its map of 100,000 datapoints drawn.

Two synthetic runs (``benchmarks.viewer_browser.write_large_run``) of ``--rows`` and ``--small-rows`` datapoints,
their epoch tables given eight debugger summaries drawn from twelve clusters; each run's map of its summaries is
computed once (``python -m runners.embeddings``'s ``compute_map``, timed and printed) and stored in its epoch
folder, as the viewer finds it. The viewer is served as users serve it (``python -m runners.eval_viewer``, a
process of its own) and driven by Chromium through playwright; every time is taken in the browser's own clock:

- tab → map drawn: with the run's table shown, a click on the Embeddings tab to every point of the map in the
  drawn plot (the WebGL scatter's traces hold all the map's datapoints) and the next frame painted; target ≤ 2 s
  at 100,000 datapoints. The two runs are measured interleaved, so their ratio holds under any load.

    python -m benchmarks.viewer_maps [--quick] [--rows 100000] [--small-rows 10000] [--times 5] [--method pca]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from urllib.parse import quote

import numpy as np
import pyarrow.parquet as pq

from analysis.epoch_table import ROLES_KEY, write_epoch_table
from benchmarks.viewer_browser import CHROMIUM, CHROMIUM_ARGS, REPO_ROOT, SHOWN, write_large_run
from run_dir import RunDir
from run_dir.names import EPOCH_TABLE_FILE
from runners.embeddings import compute_map, describe
from runners.eval_viewer.embeddings.ids import EMBEDDING_MAP, TAB_EMBEDDINGS
from tests.reliability.viewer_server import viewer_process

SUMMARIES, CLUSTERS = 8, 12
TARGET_MS = 2000
WAIT_MS = 120_000
# Resolves with performance.now() at the first frame painted after the map holds all its points (-1 past the wait).
DRAWN = f"""(count) => new Promise(resolve => {{
    const deadline = performance.now() + {WAIT_MS};
    const check = () => {{
        const gd = document.querySelector('#{EMBEDDING_MAP} .js-plotly-plot');
        const drawn = gd && gd._fullData ? gd._fullData.slice(0, -2)
            .reduce((sum, trace) => sum + (trace.customdata ? trace.customdata.length : 0), 0) : 0;
        if (drawn === count) {{ requestAnimationFrame(() => resolve(performance.now())); }}
        else if (performance.now() > deadline) {{ resolve(-1); }}
        else {{ requestAnimationFrame(check); }}
    }};
    check();
}})"""
CLICK_TAB = f"() => {{ const at = performance.now(); document.getElementById('{TAB_EMBEDDINGS}').click(); return at; }}"


def add_summaries(run: str, rows: int, rng: np.random.Generator) -> str:
    """The run's last epoch table given ``SUMMARIES`` summary columns drawn around ``CLUSTERS`` centres; its folder."""
    epoch_dir = RunDir(run).epoch_dir()
    path = os.path.join(epoch_dir, EPOCH_TABLE_FILE)
    table = pq.read_table(path)
    roles = json.loads(table.schema.metadata[ROLES_KEY])
    centres = rng.normal(0, 4, (CLUSTERS, SUMMARIES))
    values = centres[rng.integers(0, CLUSTERS, rows)] + rng.normal(0, 1, (rows, SUMMARIES))
    columns = {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}
    names = [f"summary_{i}" for i in range(SUMMARIES)]
    columns.update({name: values[:, i] for i, name in enumerate(names)})
    write_epoch_table(path, columns, {**roles, "summaries": names})
    return epoch_dir


def tab_draw_ms(browser, url: str, run: str, count: int) -> float:
    """With the run's table shown, a click on the Embeddings tab to its map of ``count`` points drawn."""
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.goto(f"{url}/?run={quote(run)}")
    page.wait_for_function(SHOWN, timeout=WAIT_MS)
    clicked = page.evaluate(CLICK_TAB)
    drawn = page.evaluate(DRAWN, count)
    page.close()
    if drawn < 0:
        raise RuntimeError(f"the map of {count} datapoints was not drawn within {WAIT_MS / 1000:.0f} s")
    return drawn - clicked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 and 2,000 datapoints, two draws each")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--small-rows", type=int, default=10_000)
    parser.add_argument("--times", type=int, default=5, help="draws of each run")
    parser.add_argument("--method", choices=("pca", "umap"), default="pca",
                        help="how the maps are computed (the draw does not depend on it; UMAP takes minutes)")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.small_rows, args.times = 20_000, 2_000, 2
    from playwright.sync_api import sync_playwright

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        runs = {}
        for rows in (args.rows, args.small_rows):
            run = write_large_run(folder, rows)
            started = time.monotonic()
            stored = compute_map(add_summaries(run, rows, rng), "summaries", args.method)
            print(f"{rows:>9,} datapoints: map computed once in {time.monotonic() - started:5.1f} s "
                  f"({describe(stored)})")
            runs[run] = rows
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        times: dict[str, list[float]] = {run: [] for run in runs}
        with viewer_process(["--log-dirs", folder], cwd=REPO_ROOT) as (url, _):
            for round_ in range(args.times):
                for run in (list(runs) if round_ % 2 == 0 else list(runs)[::-1]):
                    times[run].append(tab_draw_ms(browser, url, run, runs[run]))
        browser.close()
    medians = {run: statistics.median(found) for run, found in times.items()}
    for run, rows in runs.items():
        target = f"  target ≤ {TARGET_MS} ms {'ok' if medians[run] <= TARGET_MS else 'MISSED'}" \
            if rows >= 100_000 else ""
        print(f"tab → map drawn, {rows:>9,} datapoints: median {medians[run]:6.0f} ms  max {max(times[run]):6.0f} ms "
              f"(n={len(times[run])}){target}")
    large, small = list(runs)
    print(f"ratio {runs[large]:,} / {runs[small]:,} datapoints: {medians[large] / medians[small]:.2f}x")


if __name__ == "__main__":
    main()
