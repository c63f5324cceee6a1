"""Pieces the benchmark scripts share: the capture loops compared side by side, and how they are timed.

Every comparison runs its cases interleaved, in a new random order each round, and
compares medians: load from other processes on a shared machine then falls on every
case alike. The *hand-written floor* is what a user would write without Lantern: a plain
forward hook (or capture listener) that ``numpy.save``s each batch, read back with
``numpy.load(mmap_mode='r')``.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Callable
from typing import Any, Optional

import numpy as np
import torch

from debuggers.capture import listen
from debuggers.forward_debugger import ForwardDebugger
from debuggers.utils import require_layer
from debuggers.wrappers.sequential_debugger import SequentialDebugger


class RawFeatures(ForwardDebugger):
    """The layer's whole output for every datapoint: the heaviest capture a user asks for."""

    def process_forward(self, module: torch.nn.Module, input: Any, output: torch.Tensor) -> dict:
        return {"features": output.detach()}


def timed(fn: Callable[[], Any], clock: Callable[[], float] = time.perf_counter) -> float:
    start = clock()
    fn()
    return clock() - start


def interleaved_medians(cases: dict[str, Callable[[], Any]], rounds: int, seed: int = 0,
                        between_rounds: Callable[[], Any] | None = None,
                        clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Median seconds of each case over ``rounds`` rounds (``interleaved_times``)."""
    times = interleaved_times(cases, rounds, seed, between_rounds, clock)
    return {name: statistics.median(values) for name, values in times.items()}


def interleaved_times(cases: dict[str, Callable[[], Any]], rounds: int, seed: int = 0,
                      between_rounds: Callable[[], Any] | None = None,
                      clock: Callable[[], float] = time.perf_counter,
                      before_each: Callable[[], Any] | None = None) -> dict[str, list[float]]:
    """Seconds of each case in each of ``rounds`` rounds, run in a new random order each round
    (``between_rounds``, untimed, after each round; ``before_each``, untimed, before each case: the last case's
    files removed). ``clock=time.process_time`` counts this process's CPU time (every thread, the page writer's
    too) instead of wall time: steadier on a loaded machine."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    order = random.Random(seed)
    for _ in range(rounds):
        for name in order.sample(list(cases), len(cases)):
            if before_each is not None:
                before_each()
            times[name].append(timed(cases[name], clock))
        if between_rounds is not None:
            between_rounds()
    return times


def lantern(model: torch.nn.Module, folder: str, debugger_config: dict, page_size_mb: float = 100,
            ) -> SequentialDebugger:
    """A ``SequentialDebugger`` with one debugger, capturing into ``folder``."""
    debugger = SequentialDebugger([{"name": "d", "debugger_config": debugger_config}], page_size_mb=page_size_mb,
                                  model=model)
    debugger.reset_buffer(folder)
    debugger.enabled = True
    return debugger


def run_loop(model: torch.nn.Module, batches: list[dict], debugger: Optional[SequentialDebugger] = None) -> None:
    """The evaluation loop: forward every batch, then the debugger (pages flushed at the end)."""
    with torch.no_grad():
        for batch in batches:
            dp = dict(batch)
            dp["outputs"] = model(dp["inputs"])
            if debugger is not None:
                debugger(dp, model)
    if debugger is not None:
        debugger.save_all()


class FloorWriter:
    """The hand-written floor's storage: one ``numpy.save`` per batch, ``batch_{k}.npy`` in ``folder``."""

    def __init__(self, folder: str) -> None:
        os.makedirs(folder, exist_ok=True)
        self.folder, self.batches = folder, 0

    def save(self, tensor: torch.Tensor) -> None:
        np.save(os.path.join(self.folder, f"batch_{self.batches}.npy"), tensor.detach().cpu().numpy())
        self.batches += 1


def floor_hook(model: torch.nn.Module, layer: str, folder: str) -> torch.utils.hooks.RemovableHandle:
    """A plain forward hook saving ``layer``'s output of every batch."""
    writer = FloorWriter(folder)
    return require_layer(model, layer).register_forward_hook(lambda module, args, output: writer.save(output))


def floor_listener(component: str, state: str, folder: str):
    """A plain capture listener saving ``component.state`` of every batch (e.g. attention weights)."""
    writer = FloorWriter(folder)

    def save(seen_component: str, seen_state: str, data: Any, metadata: Optional[dict]) -> None:
        if (seen_component, seen_state) == (component, state):
            writer.save(data)

    return listen(save)


def floor_read(folder: str, idx: int, batch_size: int) -> np.ndarray:
    """One datapoint back from the floor's files: the mmap of its batch file, its row touched."""
    row = np.load(os.path.join(folder, f"batch_{idx // batch_size}.npy"), mmap_mode="r")[idx % batch_size]
    row.sum()
    return row


def bytes_read() -> int:
    """Bytes this process has read with read()/pread() so far (Linux), to check reads by their volume."""
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])
