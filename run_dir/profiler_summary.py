"""The profiler's summary (``profiler_summary.json``): which training steps were profiled, how long each took, and the
ops that took the most time in them, written by the profiler hook and read back as data by the viewer.

Read as data: the file is capped in size, every field is checked, and an op row whose fields are not what the hook
writes is left out; a crafted file yields fewer rows and a reason, never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from run_dir.run_files import finite_or_none, read_run_json
from utils.atomic_files import atomic_write_json

MAX_SUMMARY_BYTES = 4 * 2**20  # the hook writes a few kilobytes
MAX_OPS = 1000
MAX_NAME = 300
OP_NUMBERS = ("calls", "self_cpu_ms", "cpu_total_ms", "self_device_ms")


@dataclass
class ProfiledOp:
    """One op (an aten op, a module's forward, ...) summed over the profiled steps."""

    name: str
    calls: int
    self_cpu_ms: float  # time in the op itself, not in the ops it called
    cpu_total_ms: float
    self_device_ms: float  # on the GPU; 0 on the CPU


@dataclass
class ProfilerSummary:
    first_step: int
    steps: int
    epoch: int
    device: str
    ms_per_step: float  # wall time, profiling included
    trace: str  # the trace's file name, beside the summary
    ops: list[ProfiledOp] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def write_profiler_summary(path: str, summary: ProfilerSummary) -> None:
    atomic_write_json(path, {
        "first_step": summary.first_step, "steps": summary.steps, "epoch": summary.epoch, "device": summary.device,
        "ms_per_step": summary.ms_per_step, "trace": summary.trace,
        "ops": [{"name": op.name, **{key: getattr(op, key) for key in OP_NUMBERS}} for op in summary.ops]})


def read_profiler_summary(path: str) -> Optional[ProfilerSummary]:
    """The summary at ``path``, None when there is none; ``RunFileError`` for a file that is not JSON or too large."""
    try:
        stored = read_run_json(path, "profiler summary", MAX_SUMMARY_BYTES)
    except FileNotFoundError:
        return None
    if not isinstance(stored, dict):
        return ProfilerSummary(0, 0, 0, "?", float("nan"), "", problems=[f"{path} is not a JSON object"])
    summary = ProfilerSummary(_whole(stored.get("first_step")), _whole(stored.get("steps")),
                              _whole(stored.get("epoch")), _text(stored.get("device")),
                              _number(stored.get("ms_per_step")), _text(stored.get("trace")))
    rows = stored.get("ops") if isinstance(stored.get("ops"), list) else []
    for row in rows[:MAX_OPS]:
        op = _op(row)
        if op is None:
            summary.problems.append(f"an op row of {path} is not what the profiler writes; left out")
        else:
            summary.ops.append(op)
    return summary


def _op(row: Any) -> Optional[ProfiledOp]:
    if not isinstance(row, dict) or not isinstance(row.get("name"), str):
        return None
    numbers = [row.get(key) for key in OP_NUMBERS]
    if not all(type(value) in (int, float) and finite_or_none(value) is not None for value in numbers):
        return None
    calls, *times = numbers
    return ProfiledOp(row["name"][:MAX_NAME], int(calls), *(float(value) for value in times))


def _whole(value: Any) -> int:
    return value if type(value) is int else 0


def _number(value: Any) -> float:
    number = finite_or_none(value) if type(value) in (int, float) else None
    return number if number is not None else float("nan")


def _text(value: Any) -> str:
    return value[:MAX_NAME] if isinstance(value, str) else ""
