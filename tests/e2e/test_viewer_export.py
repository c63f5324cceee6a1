"""The Export button in a real headless Chromium: every filtered row (more than the 50 it used to stop at), in the
table's order, the filters and sort that chose them recorded in the report, no column twice, and the report
itself opened in Chromium: no error, its maps drawn as images, a chart drawn once scrolled to."""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow.parquet as pq
import pytest

from run_dir.names import EPOCH_TABLE_FILE
from runners.eval_viewer.export.ids import EXPORT_BUTTON
from runners.eval_viewer.table.ids import TABLE, TABLE_CAPTION
from tests.e2e.conftest import DEBUGGER, expect
from tests.e2e.viewer_page import filter_column, wait_caption
from tests.runs import train, write_config

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

ROWS = 56
STATS = """
from debuggers.activation_stats_debugger import ActivationStatsDebugger
config["debugger"]["args"]["debuggers_config"].append({"name": "stats", "debugger_config": {
    "class": ActivationStatsDebugger, "args": {"layer_name": "backbone.layer3", "histogram_bins": 8}}})
"""


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    (root / "configs").mkdir()
    train(write_config(root / "configs" / "run.py", root / "logs" / "run", epochs=1, val_size=ROWS, val_batch=28,
                       extra=DEBUGGER + STATS))
    return root / "logs"


def export(page) -> str:
    with page.expect_download() as download:
        page.click(f"#{EXPORT_BUTTON}")
    return open(download.value.path(), encoding="utf-8").read()


@pytest.mark.slow
def test_every_filtered_row_is_exported_in_order_saying_how_they_were_chosen(viewer_url, logs, new_page):
    page = new_page(viewer_url)
    wait_caption(page, f"epoch 0: {ROWS} datapoints")
    page.click(f"#{TABLE} .ag-header-cell[col-id='idx'] .ag-header-cell-label")
    wait_caption(page, "sorted by idx (lowest first)")
    report = export(page)
    assert re.findall(r"<h2>Datapoint (\d+)</h2>", report) == [str(i) for i in range(ROWS)]  # no longer 50
    assert f"{ROWS} of {ROWS} datapoints of epoch 0 (no filter), sorted by idx (lowest first)." in report
    expect(page.locator(f"#{TABLE_CAPTION}")).to_contain_text(f"exported {ROWS} datapoints")
    header = re.search(r"<h2>Datapoints</h2><table><thead><tr>(.*?)</tr>", report).group(1)
    assert re.findall(r"<th>([^<]*)</th>", header) == ["idx", "label", "prediction", "accuracy", "cross_entropy",
                                                       "true_class_confidence"]
    assert "<h1>Lantern debug report: logs/run · epoch 0</h1>" in report and str(logs) not in report.split("<h2>")[0]

    scores = json.loads((logs / "run" / "epoch_0" / "validation_scores.json").read_text())["per_datapoint"]
    losses = np.array(scores["cross_entropy"])
    filter_column(page, "label", "ring")
    wait_caption(page, "match the filters")
    labels = pq.read_table(logs / "run" / "epoch_0" / EPOCH_TABLE_FILE, columns=["label"]).column(0).to_numpy()
    rings = np.flatnonzero(labels == 4).tolist()
    page.click(f"#{TABLE} .ag-header-cell[col-id='cross_entropy'] .ag-header-cell-label")
    wait_caption(page, "sorted by cross_entropy (lowest first)")
    report = export(page)
    order = sorted(rings, key=lambda i: losses[i])
    assert re.findall(r"<h2>Datapoint (\d+)</h2>", report) == [str(i) for i in order]
    assert f"{len(rings)} of {ROWS} datapoints of epoch 0 where label is ring (4), sorted by cross_entropy " \
           "(lowest first)." in report
    record = json.loads(re.search(r"id='lantern-selection'>(.*?)</script>", report).group(1))
    assert record["filter_model"] == {"label": {"filterType": "text", "type": "contains", "filter": "ring"}}
    assert record["sort"] == {"column": "cross_entropy", "order": "asc"} and record["datapoints"] == len(rings)

    opened = new_page(f"file://{_saved(report, logs)}")
    opened.wait_for_function("() => document.readyState === 'complete'")
    first = opened.locator("figure img[src^='data:image/svg+xml']").first
    first.scroll_into_view_if_needed()  # pictures are loaded when they come near the screen
    opened.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=first.element_handle())
    chart = opened.locator(".lazy-graph").last  # the last datapoint's histogram: drawn only once scrolled to
    assert chart.locator(".main-svg").count() == 0
    chart.scroll_into_view_if_needed()
    expect(chart.locator(".main-svg").first).to_be_visible()


def _saved(report: str, logs) -> str:
    path = logs.parent / "report.html"
    path.write_text(report, encoding="utf-8")
    return str(path)
