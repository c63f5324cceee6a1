"""The Training tab in a real headless Chromium over a real monitored run: what it draws is what the run's file
holds (every step's loss, the layers, the first non-finite step marked, the layers whose gradient did not
update, the histograms of the layer picked), drawn when the tab is opened from another one, and a run that is
still training is followed: rows appended to its file appear without a reload."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

from run_dir.monitor_file import MonitorFileWriter
from run_dir.names import MONITOR_FILE
from run_dir.training_log import KIND_STEP, read_training_log
from runners.eval_viewer.training.ids import (
    TAB_TRAINING,
    TRAINING_GRAD_CHART,
    TRAINING_HISTOGRAM_CHART,
    TRAINING_LAYER_SELECT,
    TRAINING_LOSS_CHART,
    TRAINING_NONFINITE_NOTE,
    TRAINING_STATES_TABLE,
    TRAINING_UPDATE_CHART,
)
from tests.e2e.conftest import serve_viewer
from tests.e2e.viewer_page import pick, wait_settled
from tests.runners.test_training_monitor_runs import NAN_ON_SATURATED
from tests.runs import train, write_config

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

FROZEN = """
class FrozenNormCNN(NaNOnSaturated):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.backbone.layer4.bn.requires_grad_(False)


config["model"]["class"] = FrozenNormCNN
config["training_monitor"] = {"every_n_steps": 2, "on_nonfinite": "skip_step", "histogram_bins": 16}
"""
FIGURE = "(chart) => document.querySelector(`#${chart} .js-plotly-plot`)"
TRACES = f"(chart) => ({FIGURE})(chart)._fullData.map(t => [t.name || '', Array.from(t.x || []).map(Number)])"
TITLE = f"(chart) => ({FIGURE})(chart).layout.title.text"
ANNOTATIONS = f"(chart) => (({FIGURE})(chart).layout.annotations || []).map(a => a.text)"


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """A run trained with the monitor: planted NaN steps skipped, a frozen layer, two epochs."""
    root = tmp_path_factory.mktemp("training_tab")
    config = write_config(root / "monitored.py", root / "logs" / "monitored", epochs=2, train_size=96, val_size=8,
                          extra=NAN_ON_SATURATED + FROZEN)
    train(config)
    return root / "logs"


def open_tab(new_page, url: str, address: str = f"/?tab={TAB_TRAINING}"):
    page = new_page(url + address)
    page.locator(f"#{TRAINING_LOSS_CHART} .js-plotly-plot").wait_for()
    return page


def loss_steps(page) -> list[float]:
    return dict(page.evaluate(TRACES, TRAINING_LOSS_CHART))["loss"]


def test_the_tab_draws_what_the_run_s_file_holds(new_page, viewer_url, logs):
    log = read_training_log(str(logs / "monitored" / MONITOR_FILE))
    page = open_tab(new_page, viewer_url)
    traces = dict(page.evaluate(TRACES, TRAINING_LOSS_CHART))
    finite = np.isfinite(log.losses)
    assert traces["loss"] == log.loss_steps.tolist()
    assert traces["non-finite loss"] == log.loss_steps[~finite].tolist() and (~finite).any()
    step = log.first_nonfinite_step
    for chart in (TRAINING_LOSS_CHART, TRAINING_GRAD_CHART, TRAINING_UPDATE_CHART):
        assert f"first non-finite step {step}" in page.evaluate(ANNOTATIONS, chart), chart
    layers = page.evaluate(f"() => Array.from(({FIGURE})('{TRAINING_GRAD_CHART}')._fullData[0].y)")
    assert layers == log.layers
    event = page.locator(f"#{TRAINING_NONFINITE_NOTE}").inner_text()
    assert f"First non-finite step: {step}" in event and str(log.events[0].first_layer_idx) in event
    states = page.locator(f"#{TRAINING_STATES_TABLE}").inner_text()
    assert "backbone.layer4.bn\tfrozen" in states and "non-finite" not in states
    assert page.evaluate(TITLE, TRAINING_HISTOGRAM_CHART).startswith(f"{log.layers[0]}:")
    pick(page, TRAINING_LAYER_SELECT, f"head.fc ({log.layer_types[log.layers.index('head.fc')]})")
    page.wait_for_function(f"() => ({FIGURE})('{TRAINING_HISTOGRAM_CHART}').layout.title.text.startsWith('head.fc:')")
    head = log.layers.index("head.fc")
    drawn = [h.epoch for h in log.histograms for bounds in (h.weight_range, h.grad_range)
             if np.isfinite(bounds[head]).all()]
    said = [f"epoch {h.epoch}: all {h.grad_nonfinite[head]} values NaN/Inf" for h in log.histograms
            if not np.isfinite(h.grad_range[head]).all()]  # an epoch that ended on a skipped NaN step
    assert [name for name, _ in page.evaluate(TRACES, TRAINING_HISTOGRAM_CHART)] == [f"epoch {e}" for e in drawn]
    assert said and "<br>".join(said) in page.evaluate(ANNOTATIONS, TRAINING_HISTOGRAM_CHART)


def test_the_tab_opened_from_another_tab_is_drawn(new_page, viewer_url, logs):
    page = new_page(viewer_url)
    wait_settled(page)
    page.click(f"#{TAB_TRAINING}")
    page.locator(f"#{TRAINING_LOSS_CHART} .js-plotly-plot").wait_for()
    assert len(loss_steps(page)) == read_training_log(str(logs / "monitored" / MONITOR_FILE)).loss_steps.size


def test_a_run_still_training_is_followed(new_page, logs, tmp_path):
    live = tmp_path / "logs"
    shutil.copytree(logs, live)
    path = str(live / "monitored" / MONITOR_FILE)
    log = read_training_log(path)
    with serve_viewer([str(live)]) as url:
        page = open_tab(new_page, url)
        last = int(log.loss_steps[-1])
        assert loss_steps(page)[-1] == last
        writer = MonitorFileWriter(path, keep=lambda frame: True)
        new = last + 3
        layers = len(log.layers)
        writer.append({"kind": KIND_STEP, "epoch": 2, "step": new, "first_step": last + 1, "loss": 0.5},
                      {"losses": np.full(3, 0.5, np.float32), "lr": np.array([0.01]),
                       "grad_norm": np.ones(layers, np.float32), "weight_norm": np.ones(layers, np.float32),
                       "update_ratio": np.full(layers, 1e-3, np.float32), "grad_state": np.zeros(layers, np.uint8)})
        writer.close()
        page.wait_for_function(f"() => {{ const t = ({FIGURE})('{TRAINING_LOSS_CHART}')._fullData[0].x; "
                               f"return Number(t[t.length - 1]) === {new}; }}")  # within the page's refresh tick
        steps = page.evaluate(f"() => Array.from(({FIGURE})('{TRAINING_GRAD_CHART}')._fullData[0].x).map(Number)")
        assert steps[-1] == new and not math.isnan(steps[-1])
