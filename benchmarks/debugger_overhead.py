"""Capture cost side by side: no capture, Lantern, the hand-written floor, and captum where it applies.

Three workloads, each timed as whole evaluation passes (forward, capture, pages flushed),
in a new random order each round, medians compared as ratios to the pass without capture, and
each case's ratio to the floor (captum for Grad-CAM) in the same round, its median over the rounds
(the two ran moments apart: the machine's own drift weighs less on it):

* **feature maps**: ``SmallCNN``, the full output of ``backbone.layer2`` of every datapoint
  to disk; also a configured but disabled debugger. Floor: a forward hook ``numpy.save``-ing
  each batch. Targets: disabled <= 1.02, capture <= 1.10.
* **attention**: ``AttentionClassifier``, ``AttentionDebugger('blocks.1.attn')``; also with
  ``direct_io=False`` (the weights written through the page cache, not with O_DIRECT), and with
  its summaries only (no page written: what the page writer's thread adds is the difference), and with the
  ``BufferPool``'s new buffers made with ``MAP_POPULATE`` (their pages made at once) or by ``mmap``'s default
  (shared, faulted page by page); floor: a capture listener ``numpy.save``-ing each batch's
  weights. Target <= 1.10.
* **Grad-CAM**: ``GradCAMDebugger('backbone.layer4')`` against captum's ``LayerGradCam``
  upsampled to the input and ``numpy.save``-d per batch. Target: <= captum.
* **attention-threads**: where the attention capture's CPU time goes, per batch: on the
  forward thread (the forward pass with the hooks and the copy, the debugger's call: record,
  batch split, summaries, queueing) and on the other threads (row statistics, page writer).
* **new-buffers**: the ``BufferPool``'s mapping alone: ms to map a new 4 MB buffer and fill it with a copy (as a
  batch's attention weights are copied), its private mapping faulted page by page against ``mmap``'s default
  (shared) and a private mapping made at once (``MAP_POPULATE``); 6 a round (the pool's buffers of an
  epoch), interleaved, wall and CPU time.
* **attention-processes**: the attention cases again, each in a new process of its own that runs
  only that case, epoch after epoch, as a training run does (``--rounds`` processes per case):
  there the C heap's state is the case's own, where the side-by-side run shares one between the
  cases. Wall ms per batch and the forward thread's minor page faults per batch.

    python -m benchmarks.debugger_overhead [--datapoints 512] [--rounds 7] [--threads 1]
        [--workloads features attention gradcam attention-threads new-buffers attention-processes] [--cpu-time]

``--cpu-time`` compares the process's CPU time (all threads, the page writer's included)
instead of wall time: on a machine loaded by other work, wall time mostly measures the load.
"""

from __future__ import annotations

import argparse
import contextlib
import mmap
import multiprocessing
import os
import random
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from captum.attr import LayerAttribution, LayerGradCam

from benchmarks.common import RawFeatures, floor_hook, floor_listener, interleaved_times, run_loop, timed
from data.datasets import SyntheticShapesDataset, collate_datapoints
from debuggers.attention_debugger import AttentionDebugger
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.pages import buffer_pool
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from models import AttentionClassifier, SmallCNN


class Workload:
    """One model and its batches; every case is a callable running one whole pass into a fresh folder."""

    def __init__(self, model: torch.nn.Module, batches: list[dict], root: str) -> None:
        self.model, self.batches, self.root = model, batches, root
        self.cases: dict[str, Callable[[], Any]] = {"none": lambda: run_loop(model, batches)}
        self.floor = ""  # the case every other is compared with round by round

    def folder(self) -> str:
        shutil.rmtree(self.root, ignore_errors=True)
        return self.root

    def add_lantern(self, name: str, debugger_config: dict, enabled: bool = True, pages: bool = True,
                    **debugger_args: Any) -> None:
        """A ``SequentialDebugger`` capturing every pass (or configured, with its hooks, but never enabled;
        ``pages=False``: collecting the summaries only); ``debugger_args`` go to it."""
        debugger = SequentialDebugger([{"name": "d", "debugger_config": debugger_config}], page_size_mb=100,
                                      model=self.model, **debugger_args)

        def run() -> None:
            if not enabled:
                return run_loop(self.model, self.batches)
            debugger.reset_buffer(self.folder(), full_outputs=pages)
            debugger.enabled = True
            run_loop(self.model, self.batches, debugger)
            debugger.enabled = False

        self.cases[name] = run

    def add_floor(self, name: str, attach: Callable[[str], Any], run: Callable[[], None] | None = None) -> None:
        def case() -> None:
            handle = attach(self.folder())
            try:
                (run or (lambda: run_loop(self.model, self.batches)))()
            finally:
                handle.remove()

        self.cases[name] = case
        self.floor = name

    def report(self, title: str, args: argparse.Namespace) -> None:
        """Each case's median and its ratio to no capture, and the median over rounds of its ratio to the floor
        in the same round: the two ran moments apart, so what the machine did in between weighs on both."""
        clock = time.process_time if args.cpu_time else time.perf_counter
        times = interleaved_times(self.cases, args.rounds, clock=clock)
        medians = {name: statistics.median(values) for name, values in times.items()}
        print(f"\n{title}: {args.datapoints} datapoints, median of {args.rounds} interleaved rounds, "
              f"{'CPU' if args.cpu_time else 'wall'} time; 'to the floor': the median of each round's ratio to "
              f"'{self.floor}'")
        print(f"| {'case':<44} | {'ms / datapoint':>14} | {'ratio':>6} | {'to the floor':>12} |")
        print(f"| {'-' * 44} | {'-' * 13}: | {'-' * 5}: | {'-' * 11}: |")
        for name, seconds in medians.items():
            to_floor = statistics.median(t / f for t, f in zip(times[name], times[self.floor]))
            print(f"| {name:<44} | {seconds / args.datapoints * 1e3:>14.3f} | {seconds / medians['none']:>6.3f} "
                  f"| {to_floor:>12.3f} |")


class CaptumGradCamFloor:
    """captum's LayerGradCam of the predicted class per batch, upsampled to the input, one ``numpy.save``."""

    def __init__(self, model: torch.nn.Module, layer: torch.nn.Module, batches: list[dict]) -> None:
        self.model, self.batches = model, batches
        self.gradcam = LayerGradCam(lambda image: model({"image": image})["logits"], layer)
        self.folder = ""

    def attach(self, folder: str) -> CaptumGradCamFloor:
        os.makedirs(folder, exist_ok=True)
        self.folder = folder
        return self

    def remove(self) -> None:
        self.folder = ""

    def run(self) -> None:
        for k, batch in enumerate(self.batches):
            image = batch["inputs"]["image"]
            with torch.no_grad():
                target = self.model(batch["inputs"])["logits"].argmax(dim=1)
            cam = self.gradcam.attribute(image, target=target, relu_attributions=True)
            cam = LayerAttribution.interpolate(cam, image.shape[-2:], "bilinear")
            np.save(os.path.join(self.folder, f"batch_{k}.npy"), cam.detach().numpy())


WORKLOADS = ["features", "attention", "gradcam", "attention-threads", "new-buffers", "attention-processes"]


def batches_of(datapoints: int, batch_size: int, resolution: int) -> list[dict]:
    dataset = SyntheticShapesDataset(num_datapoints=datapoints, resolution=resolution, split="val")
    return [collate_datapoints([dataset[i] for i in range(s, min(s + batch_size, datapoints))])
            for s in range(0, datapoints, batch_size)]


def measure_features(cnn: torch.nn.Module, batches: list[dict], root: str, args: argparse.Namespace) -> None:
    features = Workload(cnn, batches, os.path.join(root, "out"))
    config = {"class": RawFeatures, "args": {"layer_name": "backbone.layer2"}}
    features.add_lantern("debugger configured, disabled", config, enabled=False)
    features.add_lantern("Lantern: backbone.layer2 to disk", config)
    features.add_floor("floor: hook + numpy.save per batch", lambda f: floor_hook(cnn, "backbone.layer2", f))
    features.report("Feature maps (SmallCNN, 32 px)", args)


ATTENTION_CASES = ["none", "Lantern: AttentionDebugger(blocks.1.attn)", "Lantern, direct_io=False",
                   "Lantern, buffers: MAP_POPULATE", "Lantern, buffers: mmap's default",
                   "Lantern, summaries only (no pages)", "floor: listener + numpy.save per batch"]


def default_mapping(nbytes: int) -> np.ndarray:
    """A buffer as ``mmap``'s default makes it: shared anonymous memory, faulted in page by page."""
    return np.frombuffer(mmap.mmap(-1, nbytes), dtype=np.uint8)


def populated_mapping(nbytes: int) -> np.ndarray:
    """A private anonymous mapping whose pages are made at once (``MAP_POPULATE``), in one system call."""
    return np.frombuffer(mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_POPULATE), dtype=np.uint8)


@contextlib.contextmanager
def buffers_made_by(make: Callable[[int], np.ndarray]):
    """``BufferPool`` makes its new buffers with ``make`` meanwhile."""
    own, buffer_pool._mapped = buffer_pool._mapped, make
    try:
        yield
    finally:
        buffer_pool._mapped = own


def _with_buffers_made_by(make: Callable[[int], np.ndarray], run: Callable[[], Any]) -> Callable[[], Any]:
    def case() -> Any:
        with buffers_made_by(make):
            return run()
    return case


def attention_workload(batches: list[dict], root: str) -> Workload:
    attention = Workload(AttentionClassifier().eval(), batches, os.path.join(root, "out"))
    config = {"class": AttentionDebugger, "args": {"layer_name": "blocks.1.attn"}}
    _, lantern, page_cache, populated, shared, summaries, floor = ATTENTION_CASES
    attention.add_lantern(lantern, config)
    attention.add_lantern(page_cache, config, direct_io=False)
    for name, make in ((populated, populated_mapping), (shared, default_mapping)):
        attention.add_lantern(name, config)
        attention.cases[name] = _with_buffers_made_by(make, attention.cases[name])
    attention.add_lantern(summaries, config, pages=False)
    attention.add_floor(floor, lambda f: floor_listener("blocks.1.attn", "attention_weights", f))
    return attention


def measure_attention(batches: list[dict], root: str, args: argparse.Namespace) -> None:
    attention_workload(batches, root).report("Attention maps (AttentionClassifier, 32 px)", args)


PROCESS_EPOCHS = (2, 10)  # epochs run before measuring (the heap settles), epochs measured


def one_case_process(case: str, args: argparse.Namespace) -> tuple[float, float]:
    """In a new process: ``case`` of the attention workload only, epoch after epoch; the median seconds per batch
    of the measured epochs and the forward thread's minor page faults per batch."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    root = tempfile.mkdtemp(prefix="lantern-bench-")
    try:
        batches = batches_of(args.datapoints, args.batch_size, 32)
        run = attention_workload(batches, root).cases[case]
        warm_up, measured = PROCESS_EPOCHS
        for _ in range(warm_up):
            run()
        faults = _minor_faults()
        seconds = [timed(run) for _ in range(measured)]
        faults = _minor_faults() - faults
        return statistics.median(seconds) / len(batches), faults / (measured * len(batches))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _minor_faults() -> int:
    """This thread's minor page faults so far (the process's where the system counts no thread's: not Linux)."""
    return resource.getrusage(getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)).ru_minflt


def measure_attention_processes(args: argparse.Namespace) -> None:
    """Each case in processes of its own (``one_case_process``), the cases' processes in a new random order each
    round; medians over the rounds."""
    results: dict[str, list[tuple[float, float]]] = {case: [] for case in ATTENTION_CASES}
    order = random.Random(0)
    with multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=1) as processes:  # a new one each time
        for _ in range(args.rounds):
            for case in order.sample(ATTENTION_CASES, len(ATTENTION_CASES)):
                results[case].append(processes.apply(one_case_process, (case, args)))
    medians = {case: [statistics.median(parts) for parts in zip(*runs)] for case, runs in results.items()}
    print(f"\nAttention maps, each case in processes of its own ({args.datapoints} datapoints an epoch, "
          f"{PROCESS_EPOCHS[1]} epochs measured after {PROCESS_EPOCHS[0]}), median of {args.rounds} processes each")
    print(f"| {'case':<44} | {'ms / batch':>10} | {'ratio':>6} | {'minor faults / batch':>20} |")
    print(f"| {'-' * 44} | {'-' * 9}: | {'-' * 5}: | {'-' * 19}: |")
    for case, (seconds, faults) in medians.items():
        print(f"| {case:<44} | {seconds * 1e3:>10.2f} | {seconds / medians['none'][0]:>6.3f} | {faults:>20.0f} |")


def measure_attention_threads(batches: list[dict], root: str, args: argparse.Namespace) -> None:
    """CPU ms per batch, medians of interleaved rounds: the forward thread's forward pass and debugger calls
    (``time.thread_time``), and the rest of the process's CPU time (its other threads)."""
    model = AttentionClassifier().eval()
    debugger = SequentialDebugger([{"name": "d", "debugger_config": {
        "class": AttentionDebugger, "args": {"layer_name": "blocks.1.attn"}}}], page_size_mb=100, model=model)

    def one_pass(capture: bool) -> tuple[float, float, float]:
        if capture:
            debugger.reset_buffer(os.path.join(root, "out"))
            debugger.enabled = True
        forward = call = 0.0
        process = time.process_time()
        with torch.no_grad():
            for batch in batches:
                dp, start = dict(batch), time.thread_time()
                dp["outputs"] = model(dp["inputs"])
                forward += time.thread_time() - start
                if capture:
                    start = time.thread_time()
                    debugger(dp, model)
                    call += time.thread_time() - start
        if capture:
            start = time.thread_time()
            debugger.save_all()
            call += time.thread_time() - start
            debugger.enabled = False
        return forward, call, time.process_time() - process - forward - call

    times: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
    order = random.Random(0)
    for _ in range(args.rounds):
        for capture in order.sample([False, True], 2):
            times[capture].append(one_pass(capture))
    per_batch = {capture: [statistics.median(parts) / len(batches) * 1e3 for parts in zip(*runs)]
                 for capture, runs in times.items()}
    (forward_none, _, other_none), (forward, call, other) = per_batch[False], per_batch[True]
    print(f"\nAttention capture's CPU time (AttentionClassifier, 32 px): ms per batch of {args.batch_size}, "
          f"median of {args.rounds} interleaved rounds")
    print(f"| {'where':<58} | {'no capture':>10} | {'capture':>8} | {'added':>6} |")
    print(f"| {'-' * 58} | {'-' * 9}: | {'-' * 7}: | {'-' * 5}: |")
    for name, none, lantern in (("forward thread: forward pass (hooks, copy of the weights)", forward_none, forward),
                                ("forward thread: debugger call (split, summaries, queue)", 0.0, call),
                                ("other threads: row statistics, page writer", other_none, other)):
        print(f"| {name:<58} | {none:>10.2f} | {lantern:>8.2f} | {lantern - none:>6.2f} |")


def measure_new_buffers(args: argparse.Namespace, buffers: int = 6, nbytes: int = 4 * 1024 * 1024) -> None:
    """ms per new buffer mapped and filled with a copy, each way, ``buffers`` a round, interleaved rounds."""
    source = np.random.default_rng(0).random(nbytes // 8)
    ways = {"private, faulted page by page (BufferPool's)": buffer_pool._mapped,
            "mmap's default (shared)": default_mapping, "private, MAP_POPULATE": populated_mapping}

    def fill(make: Callable[[int], np.ndarray]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(buffers):
                buffer = make(nbytes)
                np.copyto(buffer.view(np.float64), source)
                del buffer
        return run

    print(f"\nNew {nbytes >> 20} MB buffers mapped and filled with a copy, ms per buffer, median of {args.rounds} "
          f"interleaved rounds of {buffers} (quartiles); load average {os.getloadavg()[0]:.2f}")
    print(f"| {'way':<32} | {'wall':>18} | {'CPU':>18} |")
    print(f"| {'-' * 32} | {'-' * 17}: | {'-' * 17}: |")
    figures = {clock: interleaved_times({way: fill(make) for way, make in ways.items()}, args.rounds, clock=clock)
               for clock in (time.perf_counter, time.process_time)}
    for way in ways:
        cells = []
        for clock in (time.perf_counter, time.process_time):
            per_buffer = [t / buffers * 1e3 for t in figures[clock][way]]
            q1, _, q3 = statistics.quantiles(per_buffer, n=4)
            cells.append(f"{statistics.median(per_buffer):.2f} ({q1:.2f}–{q3:.2f})")
        print(f"| {way:<32} | {cells[0]:>18} | {cells[1]:>18} |")


def measure_gradcam(cnn: torch.nn.Module, batches: list[dict], root: str, args: argparse.Namespace) -> None:
    gradcam = Workload(cnn, batches, os.path.join(root, "out"))
    gradcam.add_lantern("Lantern: GradCAMDebugger(backbone.layer4)",
                        {"class": GradCAMDebugger, "args": {"target_layer": "backbone.layer4"}})
    captum = CaptumGradCamFloor(cnn, cnn.backbone.layer4, batches)
    gradcam.add_floor("captum LayerGradCam + numpy.save per batch", captum.attach, captum.run)
    gradcam.report("Grad-CAM (SmallCNN, 32 px)", args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datapoints", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: stable on a shared machine)")
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=WORKLOADS, help="which to run")
    parser.add_argument("--cpu-time", action="store_true", help="compare CPU time (all threads), not wall time")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    root = tempfile.mkdtemp(prefix="lantern-bench-")
    try:
        torch.manual_seed(0)
        cnn = SmallCNN().eval()
        batches = batches_of(args.datapoints, args.batch_size, 32)
        if "features" in args.workloads:
            measure_features(cnn, batches, root, args)
        if "attention" in args.workloads:
            measure_attention(batches, root, args)
        if "gradcam" in args.workloads:
            measure_gradcam(cnn, batches, root, args)
        if "attention-threads" in args.workloads:
            measure_attention_threads(batches, root, args)
        if "new-buffers" in args.workloads:
            measure_new_buffers(args)
        if "attention-processes" in args.workloads:
            measure_attention_processes(args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
