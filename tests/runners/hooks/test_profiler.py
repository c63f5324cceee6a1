"""``config['profiler']`` in real short runs: the chosen steps profiled, the trace readable as Chrome JSON, the
summary's times those the trace holds, a window cut by the epoch's end, and a crafted summary read as data."""

from __future__ import annotations

import gzip
import json
import math

import pytest

from run_dir import RunDir
from run_dir.errors import RunFileError
from run_dir.profiler_summary import read_profiler_summary
from runners.config_file import load_config
from runners.trainers import BaseTrainer
from tests.runs import one_thread, write_config


def profiled_run(tmp_path, profiler, epochs=2):
    """64 training datapoints in batches of 16: 4 steps an epoch."""
    path = write_config(tmp_path / "c.py", tmp_path / "w", epochs=epochs, extra=f'config["profiler"] = {profiler!r}\n')
    with one_thread():
        BaseTrainer(load_config(path)).run()
    return RunDir(str(tmp_path / "w"))


def test_the_chosen_steps_are_profiled_and_the_summary_holds_what_the_trace_holds(tmp_path):
    run = profiled_run(tmp_path, {"first_step": 5, "steps": 2})
    summary = read_profiler_summary(run.profiler_summary)
    assert (summary.first_step, summary.steps, summary.epoch, summary.device) == (5, 2, 1, "cpu")
    assert summary.problems == [] and summary.ms_per_step > 0 and summary.trace == "profiler_trace.json.gz"
    own = [op.self_cpu_ms for op in summary.ops]
    assert own == sorted(own, reverse=True) and len(summary.ops) == 30
    with gzip.open(run.profiler_trace) as trace:
        events = json.load(trace)["traceEvents"]
    # independent of the summary: the convolutions' durations as the trace records them
    [convolution] = [op for op in summary.ops if op.name == "aten::convolution"]
    durations = [event["dur"] for event in events if event.get("name") == "aten::convolution"]
    assert len(durations) == convolution.calls == 2 * 4  # 2 steps, each a forward pass through 4 conv layers
    assert math.isclose(sum(durations) / 1000, convolution.cpu_total_ms, rel_tol=0.02)
    log = open(run.file("train.log")).read()
    assert "Profiler: steps 5-6 took " in log and "the trace is " in log


def test_a_window_running_past_the_epoch_ends_with_it(tmp_path):
    run = profiled_run(tmp_path, {"first_step": 3, "steps": 3}, epochs=1)
    summary = read_profiler_summary(run.profiler_summary)
    assert (summary.first_step, summary.steps) == (3, 1)  # step 3 is epoch 0's last: validation is not profiled


def test_a_first_step_beyond_the_run_is_said(tmp_path):
    run = profiled_run(tmp_path, True, epochs=1)
    assert read_profiler_summary(run.profiler_summary) is None
    assert "config['profiler']['first_step'] = 5 is beyond this run's 4 training steps" in open(
        run.file("train.log")).read()


@pytest.mark.parametrize(("content", "ops", "problems"), [
    ('{"first_step": 1, "steps": 2, "ops": [{"name": "aten::mm", "calls": 3, "self_cpu_ms": 1.5, "cpu_total_ms": 2, '
     '"self_device_ms": 0}, {"name": 5}, {"name": "x", "calls": "3", "self_cpu_ms": 1, "cpu_total_ms": 1, '
     '"self_device_ms": 0}, {"name": "y", "calls": 1, "self_cpu_ms": 1e400, "cpu_total_ms": 1, '
     '"self_device_ms": 0}]}', ["aten::mm"], 3),
    ("[1, 2]", [], 1),
])
def test_a_crafted_summary_yields_the_rows_that_check_out(tmp_path, content, ops, problems):
    path = tmp_path / "profiler_summary.json"
    path.write_text(content)
    summary = read_profiler_summary(str(path))
    assert [op.name for op in summary.ops] == ops and len(summary.problems) == problems


def test_a_summary_too_large_or_not_json_is_refused(tmp_path):
    path = tmp_path / "profiler_summary.json"
    path.write_text("{" * 10)
    with pytest.raises(RunFileError, match="is not valid JSON"):
        read_profiler_summary(str(path))
    assert read_profiler_summary(str(tmp_path / "absent.json")) is None
