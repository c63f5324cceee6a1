"""The Training tab's profile: the steps ``config['profiler']`` recorded and the ops that took the most time of
their own in them, from the run's ``profiler_summary.json`` (read as data: ``run_dir.profiler_summary``)."""

from __future__ import annotations

from typing import Any

from dash import html

from run_dir import RunDir
from run_dir.errors import RunFileError
from run_dir.profiler_summary import ProfilerSummary, read_profiler_summary
from runners.eval_viewer.shared.components import message
from runners.eval_viewer.shared.elements import alert
from runners.eval_viewer.shared.runs import Run
from runners.eval_viewer.training.ids import TRAINING_PROFILE, TRAINING_PROFILE_TABLE


def profile_view(run: Run) -> list[Any]:
    """The profile's section of the tab; nothing when the run was not profiled."""
    path = RunDir(run.path).profiler_summary
    try:
        summary = read_profiler_summary(path)
    except (OSError, RunFileError) as exc:
        return [html.Div(message(f"the profiler summary of {run.name} cannot be read: {exc}", "danger"),
                         id=TRAINING_PROFILE)]
    if summary is None:
        return []
    return [html.Div([html.H4("Profiled steps"), html.P(_said(summary), className="hint"),
                      *[alert(problem, "warning", "training-problem") for problem in summary.problems],
                      _table(summary)], id=TRAINING_PROFILE)]


def _said(summary: ProfilerSummary) -> str:
    last = summary.first_step + summary.steps - 1
    steps = f"step {summary.first_step}" if summary.steps == 1 else f"steps {summary.first_step}-{last}"
    return (f"torch.profiler recorded {steps} (epoch {summary.epoch}, on {summary.device}): "
            f"{summary.ms_per_step:.1f} ms per step, profiling included. The ops below took the most time of their "
            f"own; the whole trace is {summary.trace} in the run folder (open it in https://ui.perfetto.dev).")


def _table(summary: ProfilerSummary) -> html.Table:
    """Op, calls, its own time on the CPU (and the GPU where it ran there), its total time, and its own time as a
    share of the profiled steps' wall time."""
    device = any(op.self_device_ms for op in summary.ops)
    wall = summary.ms_per_step * summary.steps
    header = ["op", "calls", "own CPU ms", *(["own GPU ms"] if device else []), "total CPU ms", "own share"]
    rows = [html.Tr([html.Th(name) for name in header])]
    for op in summary.ops:
        own = op.self_cpu_ms + op.self_device_ms
        cells = [op.name, str(op.calls), f"{op.self_cpu_ms:.2f}", *([f"{op.self_device_ms:.2f}"] if device else []),
                 f"{op.cpu_total_ms:.2f}", f"{100 * own / wall:.1f}%" if wall > 0 else "?"]
        rows.append(html.Tr([html.Td(cell) for cell in cells]))
    return html.Table(rows, id=TRAINING_PROFILE_TABLE, className="training-profile")
