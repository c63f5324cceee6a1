"""What the training monitor costs: training steps without it and with it, side by side.

The trainer of an example config (``cnn_trainer``: SmallCNN and Adam; ``attention_trainer``: the small vision
transformer and AdamW) runs its own ``_train_step`` over the same pre-collated batches (data loading left out,
so the ratio is the strictest: the monitor's share of the steps alone), one pass of ``--steps`` steps per case
per round, the cases in a new random order each round; medians of the rounds compared as ratios to the pass
without the monitor. A pass with the monitor ends with the epoch's histograms, as an epoch does. Cases:

* ``off``: no monitor.
* ``on``: ``config['training_monitor'] = True`` (every step checked for NaN/Inf, a row every 10 steps).
* ``every step``: a row at every step (``every_n_steps=1``): the cost of a row.
* ``checks only``: ``every_n_steps`` past the pass (one row per pass): the cost of the per-step check.

Target: ``on`` <= 1.03 (monitoring costs at most 3 % of training). On a loaded machine the ratios carry a few percent of
noise either way, so the script also prints the monitor's own CPU time per step, by part, timed around its calls during
the passes
(``TimedMonitor``), as a share of a step without it: what the monitor adds, read directly.

    python -m benchmarks.training_monitor_overhead [--workloads cnn attention] [--steps 60] [--rounds 7]
        [--threads 2] [--device cpu] [--cpu-time]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any, Optional

import torch

from benchmarks.common import interleaved_times
from configs.examples.attention_trainer import config as attention_config
from configs.examples.cnn_trainer import config as cnn_config
from debuggers.training_monitor import MonitorSettings, TrainingMonitor
from runners.hooks import Hooks, TrainingMonitorHook
from runners.trainers import BaseTrainer

WORKLOADS = {"cnn": cnn_config, "attention": attention_config}
CASES = {"on": MonitorSettings(), "every step": MonitorSettings(every_n_steps=1),
         "checks only": MonitorSettings(every_n_steps=100_000)}


class TimedMonitor(TrainingMonitor):
    """A monitor that adds up the CPU time spent in its calls: the per-step check with the row's start, the
    row's end, the epoch's end."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spent = {"check_step": 0.0, "after_step": 0.0, "end_epoch": 0.0}

    def _timed(self, name: str, call: Callable[[], Any]) -> Any:
        start = time.process_time()
        try:
            return call()
        finally:
            self.spent[name] += time.process_time() - start

    def check_step(self, datapoint: dict, loss: torch.Tensor, scaler: Optional[torch.amp.GradScaler] = None) -> bool:
        return self._timed("check_step", lambda: super(TimedMonitor, self).check_step(datapoint, loss, scaler))

    def after_step(self) -> None:
        self._timed("after_step", super().after_step)

    def end_epoch(self) -> None:
        self._timed("end_epoch", super().end_epoch)


def trainer_for(config: dict[str, Any], work_dir: str, device: str) -> BaseTrainer:
    """The example's trainer, set up as ``run`` sets it up, without its debugger (not part of training)."""
    config = {**copy.copy(config), "work_dir": work_dir, "device": device, "debugger": None,
              "datapoint_capture": False}
    trainer = BaseTrainer(config)
    trainer._init_components_()
    trainer.model.train()
    return trainer


def batches_of(trainer: BaseTrainer, steps: int) -> list[dict]:
    batches = []
    while len(batches) < steps:
        batches.extend(batch for _, batch in zip(range(steps - len(batches)), trainer.train_dataloader))
    return batches


def training_pass(trainer: BaseTrainer, batches: list[dict], monitor: TrainingMonitor | None) -> Callable[[], None]:
    hook = TrainingMonitorHook(None if monitor is None else monitor.settings)
    hook.monitor = monitor
    hooks = Hooks([] if monitor is None else [hook])

    def run() -> None:
        trainer.hooks = hooks
        if monitor is not None:
            monitor.begin_epoch(0)
        for batch in batches:
            trainer._train_step(batch)
        if monitor is not None:
            monitor.end_epoch()
        if trainer.device.type == "cuda":
            torch.cuda.synchronize()
    return run


def measure(name: str, steps: int, rounds: int, device: str, cpu_time: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        trainer = trainer_for(WORKLOADS[name], f"{folder}/run", device)
        batches = batches_of(trainer, steps)
        monitors = {}
        for i, (case, settings) in enumerate(CASES.items()):
            os.makedirs(f"{folder}/{i}")
            monitors[case] = TimedMonitor(trainer.eval_model, trainer.optimizer, settings, f"{folder}/{i}",
                                             trainer.logger)
        cases = {"off": training_pass(trainer, batches, None),
                 **{case: training_pass(trainer, batches, monitor) for case, monitor in monitors.items()}}
        training_pass(trainer, batches[:4], monitors["on"])()  # warm-up: first calls, allocations
        for monitor in monitors.values():
            monitor.spent = dict.fromkeys(monitor.spent, 0.0)
        times = interleaved_times(cases, rounds, clock=time.process_time if cpu_time else time.perf_counter)
        for monitor in monitors.values():
            monitor.close()
        trainer._close()
    off = statistics.median(times["off"])
    print(f"\n{name}: {steps} steps per pass, {rounds} rounds, median {'CPU' if cpu_time else 'wall'} ms per step "
          "(ratio to off)")
    for case, values in times.items():
        median = statistics.median(values)
        print(f"  {case:12s} {median / steps * 1e3:8.2f} ms  {median / off:6.3f}")
    print("the monitor's own CPU time per step (share of a step without it): check and row start, row end, "
          "epoch end")
    for case, monitor in monitors.items():
        parts = [spent / (rounds * steps) for spent in monitor.spent.values()]
        shares = "  ".join(f"{part * 1e3:6.3f} ms" for part in parts)
        print(f"  {case:12s} {shares}   total {sum(parts) * 1e3:6.3f} ms ({sum(parts) / (off / steps):.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS), default=sorted(WORKLOADS))
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--cpu-time", action="store_true", help="compare the process's CPU time, not wall time "
                        "(steadier on a machine loaded by other work; use with --threads 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for name in args.workloads:
        measure(name, args.steps, args.rounds, args.device, args.cpu_time)


if __name__ == "__main__":
    main()
