"""Disk taken by the default example's debug outputs under each capture policy (``keep``).

    python -m benchmarks.capture_policies [--run logs/examples/cnn_trainer]

Takes the default example's trained run (trains it into a temporary folder first when ``--run`` holds no
finished run), then validates each of its checkpoint epochs again with the example's own debuggers under
each policy, and prints the bytes written and the ratio to ``keep='all'``. The summaries (the epoch table)
are the same under every policy; their size is printed too.
"""

from __future__ import annotations

import argparse
import copy
import os
import tempfile

from configs.examples.cnn_trainer import config as example
from debuggers.pages.reader import load_debug_outputs
from run_dir import RunDir
from run_dir.budget import folder_bytes
from runners.evaluators import BaseEvaluator
from runners.trainers import BaseTrainer
from utils.atomic_files import read_json

POLICIES = {"all": "all", "failing": "failing", "worst 50 by cross_entropy": {"worst": 50, "by": "cross_entropy"}}


def trained_run(path: str) -> str:
    """``path`` if it holds the finished default example, else a fresh one trained in a temporary folder."""
    progress = RunDir(path).progress
    if os.path.exists(progress) and read_json(progress)["completed_epochs"] == example["epochs"]:
        return path
    work_dir = os.path.join(tempfile.mkdtemp(prefix="lantern-policies-"), "cnn_trainer")
    print(f"no finished run in {path}: training the default example into {work_dir}")
    BaseTrainer({**example, "work_dir": work_dir}).run()
    return work_dir


def measure(run: str, epoch: int, keep: object, work_dir: str) -> tuple[int, int, int]:
    """(datapoints with full outputs, bytes of full outputs, bytes of the epoch table) for one validation."""
    debugger = copy.deepcopy(example["debugger"])
    debugger["args"]["keep"] = keep
    BaseEvaluator({
        "runner": BaseEvaluator, "work_dir": work_dir, "seed": example["seed"],
        "checkpoint": RunDir(run).epoch(epoch).checkpoint,
        "eval_dataset": example["val_dataset"], "eval_dataloader": example["val_dataloader"],
        "model": example["model"], "metric": example["metric"], "debugger": debugger,
    }).run()
    kept = len(load_debug_outputs(work_dir))
    evaluation = RunDir(work_dir).evaluation
    return kept, folder_bytes(evaluation.debugger), os.path.getsize(evaluation.table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="logs/examples/cnn_trainer")
    run = trained_run(parser.parse_args().run)
    epochs = read_json(RunDir(run).progress)["checkpoint_indices"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="lantern-policies-") as scratch:
        for epoch in epochs:
            sizes = {name: measure(run, epoch, keep, os.path.join(scratch, f"{epoch}-{i}"))
                     for i, (name, keep) in enumerate(POLICIES.items())}
            for name, (kept, size, table) in sizes.items():
                rows.append((epoch, name, kept, size, size / sizes["all"][1], table))
    print(f"\nthe default example's validation ({example['val_dataset']['args']['num_datapoints']} datapoints), "
          f"debuggers {[d['name'] for d in example['debugger']['args']['debuggers_config']]}")
    print(f"{'epoch':>5}  {'keep':<26} {'datapoints':>10} {'full outputs':>13} {'of all':>7} {'epoch table':>12}")
    for epoch, name, kept, size, ratio, table in rows:
        print(f"{epoch:>5}  {name:<26} {kept:>10} {size / 2**20:>10.2f} MB {ratio:>7.1%} {table / 2**10:>9.1f} KB")


if __name__ == "__main__":
    main()
