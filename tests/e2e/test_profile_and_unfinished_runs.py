"""In a real headless Chromium over real runs: the Training tab lists the ops ``config['profiler']`` recorded, as the
run's profiler summary holds them; the run picker lists a run that stopped before finishing an epoch after the
others, saying why (its log's last line)."""

from __future__ import annotations

import os

import pytest

from run_dir import RunDir
from run_dir.profiler_summary import read_profiler_summary
from runners.eval_viewer.controls.ids import RUN_SELECT
from runners.eval_viewer.training.ids import TAB_TRAINING, TRAINING_LOSS_CHART, TRAINING_PROFILE_TABLE
from tests.e2e.conftest import expect
from tests.e2e.viewer_page import wait_settled
from tests.runs import run_main, train, write_config

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

PROFILED = 'config["training_monitor"] = True\nconfig["profiler"] = {"first_step": 1, "steps": 2, "top_ops": 12}\n'
BAD_LAYER = """
from debuggers.feature_map_debugger import FeatureMapDebugger
config["debugger"] = {"class": SequentialDebugger, "args": {"debuggers_config": [
    {"name": "fm", "debugger_config": {"class": FeatureMapDebugger, "args": {"layer_name": "backbone.layer9"}}}]}}
"""


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """A profiled run that finished, and one that stopped at start-up (a layer name that is not the model's)."""
    root = tmp_path_factory.mktemp("profile_tab")
    train(write_config(root / "profiled.py", root / "logs" / "profiled", epochs=1, extra=PROFILED))
    stopped = run_main(write_config(root / "stopped.py", root / "logs" / "stopped", epochs=1, extra=BAD_LAYER))
    assert stopped.returncode == 2, stopped.stderr
    return root / "logs"


def test_the_training_tab_lists_the_profiled_steps_ops(new_page, viewer_url, logs):
    summary = read_profiler_summary(RunDir(str(logs / "profiled")).profiler_summary)
    page = new_page(f"{viewer_url}/?tab={TAB_TRAINING}&run={os.path.join(str(logs), 'profiled')}")
    page.locator(f"#{TRAINING_LOSS_CHART} .js-plotly-plot").wait_for()
    table = page.locator(f"#{TRAINING_PROFILE_TABLE}")
    table.wait_for()
    rows = [row.split("\t") for row in table.inner_text().splitlines()]
    assert rows[0][:3] == ["op", "calls", "own CPU ms"]
    assert [row[0] for row in rows[1:]] == [op.name for op in summary.ops] and len(summary.ops) == 12
    assert [float(row[2]) for row in rows[1:]] == [round(op.self_cpu_ms, 2) for op in summary.ops]
    said = page.locator("#training-profile").inner_text()
    assert f"torch.profiler recorded steps 1-2 (epoch 0, on cpu): {summary.ms_per_step:.1f} ms per step" in said


def test_a_run_that_never_finished_an_epoch_is_listed_apart_with_why(new_page, viewer_url, logs):
    page = new_page(viewer_url)
    wait_settled(page)
    page.click(f"#{RUN_SELECT}")
    options = page.get_by_role("option", name="(trainer)")  # the page's tick boxes are options too
    expect(options).to_have_count(2)
    labels = options.all_inner_texts()
    assert labels[0] == "logs/profiled (trainer)"
    last_line = open(logs / "stopped" / "train.log").read().rstrip().splitlines()[-1]
    assert "stopped during start-up (exit code 2)" in last_line and "backbone.layer9" in last_line
    assert labels[1].startswith("✗ logs/stopped (trainer): no epoch finished: ERROR process ")
    assert "stopped during start-up (exit code 2)" in labels[1]
