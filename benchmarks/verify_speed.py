"""``--verify`` on a 200-datapoint finding against evaluating those 200 datapoints, side by side.

    python -m benchmarks.verify_speed [--work-dir DIR] [--rounds 7] [--threads 1] [--cpu-time]

Trains ``configs/examples/planted_units_trainer.py`` (or reuses the finished run in ``--work-dir``), rebuilds its
model once (``runners.run_model.EpochModel``, timed apart), and takes as the finding 200 datapoints: the 100 with the
highest ``unit_energy.c3`` (its planted unit: they carry the artefact, most fail) and 100 others at random, so that the
epoch holds enough failures outside it for a full control (168: the finding's size less the reference's; the slowest
case; a finding that holds most failures of the epoch gets a smaller control). Then, interleaved in a new random
order each round (medians):

- **evaluate**: those 200 datapoints through the run's own dataloader, model and metric, as its eval loop does
  (what a user reruns to look at them again);
- **verify (unit)**: ``runners.verify.verify_plan`` patching that unit: the matched control (200 more), the
  reference mean, the patched rerun of both, the statistics;
- **verify (mask)**: the same with an input region masked instead (the bottom-right corner, where the artefact is);
- **verify (shift)**: the same with that unit shifted at every position (a subgroup moved in its feature space);
- **replicate**: the held-out replication of the run's first meta slice (half A analysed over its columns, half B
  tested; no model runs), from a new split each round.

``--cpu-time`` times this process's CPU instead of the wall clock (steadier on a loaded machine). Target:
verify at most 2x evaluate. Figures: docs/benchmarks.md, "Verifying a finding".
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import torch

from analysis.epoch_table import EpochTable
from analysis.failures import FailureDefinition, analyze, resolve_epoch_dir
from analysis.finding_plans import finding_entries, plan_for_finding
from analysis.intervention import InputMask, InterventionPlan, UnitShift, failure_rule
from analysis.replication import HeldOut
from benchmarks.common import interleaved_medians
from run_dir.names import EPOCH_TABLE_FILE, PROGRESS_FILE
from runners.config_file import load_config
from runners.run_model import EpochModel
from runners.trainers import BaseTrainer
from runners.verify import run_facts, verify_plan

CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", "examples",
                      "planted_units_trainer.py")
FINDING_SIZE = 200


def trained_run(work_dir: str) -> str:
    """The example's epoch folder, trained into ``work_dir`` unless a finished run is there."""
    if not os.path.isfile(os.path.join(work_dir, PROGRESS_FILE)):
        config = load_config(CONFIG)
        config["work_dir"] = work_dir
        BaseTrainer(config).run()
    return resolve_epoch_dir(work_dir, None)


def evaluate(model: EpochModel, idx: np.ndarray) -> None:
    """The run's eval step on ``idx``: forward and per-datapoint scores."""
    with torch.no_grad():
        for batch in model.batches(idx):
            model.metric(model.model(batch["inputs"]), batch["labels"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", default=None, help="train here, or reuse the finished run there")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: steady on a shared box)")
    parser.add_argument("--cpu-time", action="store_true", help="time the process's CPU, not the wall clock")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as scratch:
        epoch_dir = trained_run(args.work_dir or os.path.join(scratch, "planted_units"))
        start = time.perf_counter()
        model = EpochModel.rebuild(epoch_dir, trust_configs=True)
        rebuilt = time.perf_counter() - start
        table = EpochTable(os.path.join(epoch_dir, EPOCH_TABLE_FILE))
        rule, failed = failure_rule(table, FailureDefinition())
        facts = run_facts(table, failed, model, epoch_dir)
        energy = table.values(["unit_energy.c3"])["unit_energy.c3"]
        planted = np.argsort(-energy)[:FINDING_SIZE // 2]
        others = np.random.default_rng(0).choice(np.setdiff1d(np.arange(len(energy)), planted),
                                                 FINDING_SIZE - len(planted), replace=False)
        idx = np.sort(facts.table_idx[np.concatenate([planted, others])])
        unit = plan_for_finding("groups-0", {"idx": idx.tolist(), "units": ["unit_energy.c3"]}, facts)
        region = np.zeros((32, 32), dtype=bool)
        region[-8:, -8:] = True
        mask = InterventionPlan("groups-1", "corner", idx.tolist(), InputMask("image", region), "a box")
        shift = InterventionPlan("groups-2", "shifted", idx.tolist(), UnitShift("trigger", (3,), (-1.0,)), "a unit")
        findings = analyze(epoch_dir).to_dict()
        key = next(key for key, _ in finding_entries(findings) if key.startswith("meta.slices"))
        slice_plan = plan_for_finding(key, dict(finding_entries(findings))[key], facts)
        slice_plan = getattr(slice_plan, "replication", None) or slice_plan
        results = {}
        medians = interleaved_medians({
            "evaluate": lambda: evaluate(model, idx),
            "verify (unit)": lambda: results.update(unit=verify_plan(model, unit, rule, facts)),
            "verify (mask)": lambda: results.update(mask=verify_plan(model, mask, rule, facts)),
            "verify (shift)": lambda: results.update(shift=verify_plan(model, shift, rule, facts)),
            "replicate": lambda: results.update(replication=HeldOut(table, failed, FailureDefinition()).replicate(
                slice_plan)),
        }, args.rounds, clock=time.process_time if args.cpu_time else time.perf_counter)
    print(f"finding: {len(idx)} datapoints, {int(failed[np.searchsorted(facts.table_idx, idx)].sum())} failing; "
          f"torch threads {args.threads}; {'CPU' if args.cpu_time else 'wall'} time; rebuilding the model once "
          f"(config, checkpoint, dataset): {rebuilt:.2f} s")
    for name, seconds in medians.items():
        print(f"{name:14s} {seconds:7.3f} s  {seconds / medians['evaluate']:5.2f}x evaluate")
    for name, result in results.items():
        if name == "replication":
            print(f"{name} of {result.finding}: {result.verdict}, {result.describe()}")
            continue
        print(f"{name}: {result.verdict}, {result.comparison.finding.failures_before} -> "
              f"{result.comparison.finding.failures_after} failing ({result.intervention}); control of "
              f"{len(result.control_idx)}, reference of {len(result.reference_idx)}")
    print(f"load: {os.getloadavg()[0]:.1f} (1-min average)")


if __name__ == "__main__":
    main()
