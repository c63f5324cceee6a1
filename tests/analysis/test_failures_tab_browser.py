"""The Failures tab in a real headless Chromium, on the small planted run: it shows the findings ``analyze``
returns (the ones the trainer stored), the data map included; every planted cause is reached in at most 3 clicks
from opening the viewer (the tab, the finding, one of its datapoints), which shows that datapoint's Debug Outputs; a
clicked finding narrows both the datapoint table and the score grid."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow.parquet as pq
import pytest

from analysis.failures import Findings, analyze
from benchmarks.failure_discovery import evaluate
from benchmarks.planted_benchmarks import planted
from data.datasets.synthetic_shapes import Planted
from runners.eval_viewer.datapoint.ids import DATAPOINT_PANEL
from runners.eval_viewer.failures.data import SEPARATOR_SHARE
from runners.eval_viewer.failures.ids import (
    FAILURES_DATA_MAP_CHART,
    FAILURES_FILTER_NOTE,
    FAILURES_FINDING,
    FAILURES_MORE,
    FAILURES_PANEL,
    FAILURES_SEPARATORS_CHART,
    TAB_FAILURES,
)
from runners.eval_viewer.scores.ids import SCORE_GRID
from runners.eval_viewer.table.ids import TABLE
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, SLOW_WAIT_MS, browser_or_skip, serve_viewer
from tests.e2e.viewer_page import column, wait_caption
from utils.builders import build_from_config

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600), pytest.mark.slow]
MAX_CLICKS = 3
GRID_IDX = """() => {
    const grid = document.getElementById('GRID').scoreGrid;  // what the page's script drew: the idx of each cell
    return grid ? grid.idx.filter(idx => idx >= 0) : null;
}""".replace("GRID", SCORE_GRID)


@dataclass
class Walk:
    cause: str  # a cause of ``benchmarks.planted_benchmarks.planted``, or 'separator' for its separating quantity
    finding: str  # the finding list's id prefix in the tab (``FAILURES_FINDING``'s index)
    planted: Callable[[Planted], bool]  # the datapoint to open: one that carries the cause
    shown: str  # what its Debug Outputs must show


WALKS = [
    Walk("shortcut marker", "slice", lambda p: p.marker_class is not None, "layer4_output"),
    Walk("small, low-contrast shapes", "slice", lambda p: p.hard, "layer4_output"),
    Walk("separator", "separator", lambda p: p.hard, "layer4_output"),
    Walk("label noise", "labels", lambda p: p.label_flipped, "layer4_output"),
    Walk("NaN", "nan", lambda p: p.saturated, "backbone.layer2"),
    Walk("dead channel", "dead", lambda p: True, "layer3_energy"),
    Walk("hard to learn", "map", lambda p: True, "layer4_output"),
]


class Clicks:
    """Every click the walk makes, counted."""

    def __init__(self) -> None:
        self.count = 0

    def on(self, locator) -> None:
        locator.click()
        self.count += 1

    def on_bar(self, page, bar) -> None:
        """A click near the end of a horizontal plotly bar (the chart's drag layer lies over the bars, and a
        bar's path starts at 0, left of the axis's 0.5, outside the chart)."""
        bar.scroll_into_view_if_needed()
        box = bar.bounding_box()
        page.mouse.click(box["x"] + box["width"] - 4, box["y"] + box["height"] / 2)
        self.count += 1


def finding_button(page, key: str):
    """The finding's button: Dash writes a dict id as JSON with sorted keys."""
    return page.locator(f"""[id='{{"index":"{key}","type":"{FAILURES_FINDING}"}}']""")


SEPARATORS = """() => {
    const bars = document.querySelector('#CHART .js-plotly-plot')._fullData[0];
    return [Array.from(bars.y), Array.from(bars.x)];
}""".replace("CHART", FAILURES_SEPARATORS_CHART)


def assert_the_tab_shows(page, findings: Findings) -> None:
    """The tab lists what ``analyze`` returns, in its order (the command's output is compared with it in
    test_planted_discovery.py)."""
    page.locator(f"#{FAILURES_PANEL} button").first.wait_for()
    titles = page.locator(f"#{FAILURES_PANEL} button b").all_inner_texts()
    assert titles == [c.description for c in findings.confusions] + [s.description for s in findings.meta.slices] \
        + [c.description for c in findings.class_slices]  # what fails first, then what the data says
    columns, aurocs = page.evaluate(SEPARATORS)
    assert columns[::-1] == [s.column for s in findings.meta.separators]
    assert aurocs[::-1] == pytest.approx([s.auroc for s in findings.meta.separators])
    more = page.locator(f"#{FAILURES_MORE}").inner_text()
    shown = [s.description for s in findings.internals.slices] + [s.column for s in findings.internals.separators]
    shown += [g.description for g in [*findings.subgroups, *findings.suspect_groups]]
    shown += [f"#{e.idx} {e.label}" for e in findings.label_issues[:5]] + [r.column for r in findings.restatements]
    shown += [o.module for o in findings.nan_origins] + [d.column for d in findings.dead_units]
    assert all(text in more for text in shown), (shown, more)
    kinds = page.evaluate(f"() => document.querySelector('#{FAILURES_DATA_MAP_CHART} .js-plotly-plot')"
                          "._fullData.map(trace => [trace.name, trace.x.length])")
    drawn, points = dict(kinds), findings.data_map.points
    assert sum(drawn.values()) == len(points["idx"])
    assert drawn["hard to learn, fails"] == sum(k == "hard to learn" and f for k, f in zip(points["kind"],
                                                                                          points["failed"]))


def chosen_idx(findings: Findings, walk: Walk, rank: int) -> list[int]:
    lists = {"slice": findings.meta.slices, "nan": findings.nan_origins}
    if walk.finding == "labels":
        return [issue.idx for issue in findings.label_issues]
    if walk.finding == "map":
        return findings.data_map.hard.tolist()
    if walk.finding == "separator":  # the failing side's most extreme tenth of the quantity
        found = findings.meta.separators[rank]
        table = pq.read_table(findings.table_path, columns=["idx", found.column]).to_pydict()
        values = np.array(table[found.column], dtype=np.float64)
        lower = found.direction == "lower in failures"
        cut = np.nanquantile(values, SEPARATOR_SHARE if lower else 1 - SEPARATOR_SHARE)
        chosen = values <= cut if lower else values >= cut
        return np.array(table["idx"])[chosen].tolist()
    if walk.finding == "dead":  # every datapoint where the unit has its one value (NaN rows have none)
        unit = findings.dead_units[rank]
        table = pq.read_table(findings.table_path, columns=["idx", unit.column]).to_pydict()
        return [i for i, value in zip(table["idx"], table[unit.column]) if value == unit.value]
    return list(lists[walk.finding][rank].idx)


def ranks_of(findings: Findings, config: dict) -> dict[str, int]:
    """Each walk's rank (1-based) in its list."""
    result = evaluate(planted(config["work_dir"], small=True), findings, baselines=False)
    ranks = {r.cause: int(r.lantern_named.split("#")[1]) for r in result["ranks"] if r.lantern_named}
    ranks |= {cause: rank for cause, rank in result["other"].items()}
    ranks["separator"] = next(i for i, s in enumerate(findings.meta.separators, 1) if s.column in ("scale", "contrast"))
    return ranks | {"label noise": 1, "hard to learn": 1}


@pytest.fixture(scope="module")
def planted_findings(planted_run):
    findings = analyze(planted_run["work_dir"])
    dataset = build_from_config(planted_run["val_dataset"], "config['val_dataset']")
    return findings, ranks_of(findings, planted_run), dataset


def test_every_planted_cause_is_three_clicks_from_opening_the_viewer(planted_run, planted_findings):
    browser_or_skip()
    from playwright.sync_api import sync_playwright

    findings, ranks, dataset = planted_findings
    total = findings.datapoints
    errors = []
    with serve_viewer([os.path.dirname(planted_run["work_dir"])]) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.set_default_timeout(SLOW_WAIT_MS)  # the tab analyses the epoch on first show: slow on a busy machine
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        for walk in WALKS:
            rank = ranks[walk.cause]
            assert rank is not None and rank <= 3, f"{walk.cause} ranks {rank}"
            key = {"labels": "labels-0", "map": "map-hard"}.get(walk.finding, f"{walk.finding}-{rank - 1}")
            expected = chosen_idx(findings, walk, rank - 1)
            clicks = Clicks()
            page.goto(url, wait_until="networkidle")  # opening the viewer; clicks wait for its first callbacks
            wait_caption(page, f"{total} datapoints")

            clicks.on(page.locator(f"#{TAB_FAILURES}"))
            if walk is WALKS[0]:
                assert_the_tab_shows(page, findings)
            if walk.finding == "separator":  # its bar; the strongest is drawn on top, the data runs bottom-up
                bars = page.locator(f"#{FAILURES_SEPARATORS_CHART} .barlayer .point")
                clicks.on_bar(page, bars.nth(len(findings.meta.separators) - rank))
            else:
                clicks.on(finding_button(page, key))
            page.wait_for_selector(f"#{FAILURES_FILTER_NOTE}:has-text('filtered to {len(expected)} datapoints')")
            if len(expected) < total:
                wait_caption(page, f"{len(expected)} of {total} datapoints match")
            page.wait_for_function(f"() => ({GRID_IDX})()?.length === {len(expected)}")
            assert sorted(page.evaluate(GRID_IDX)) == sorted(expected), f"{walk.cause}: the grid is not narrowed"

            shown = [int(text) for text in column(page, "idx")]
            assert set(shown) <= set(expected)
            row = next(i for i, idx in enumerate(shown) if walk.planted(dataset.planted(idx)))
            clicks.on(page.locator(f"#{TABLE} .ag-center-cols-container .ag-row[row-index='{row}'] "
                                   "[col-id='idx']"))
            idx = shown[row]
            page.wait_for_selector(f"#{DATAPOINT_PANEL} .datapoint-title:has-text('{idx}')")
            panel = page.locator(f"#{DATAPOINT_PANEL}").inner_text()
            assert "Debug Outputs" in panel and walk.shown in panel, f"{walk.cause}: {panel[:500]}"
            assert re.search(rf"\b{idx}\b", panel)
            assert clicks.count <= MAX_CLICKS, f"{walk.cause} took {clicks.count} clicks"
        browser.close()
    assert not errors, f"the page logged errors: {errors}"
