"""Does the failure analysis find causes planted on purpose, where other finders do? Each cause's rank, side by side.

    python -m benchmarks.failure_discovery [--benchmarks planted sites shortcuts] [--seeds 0 1] [--held-out]
                                           [--default-example] [--small] [--work-dir DIR]

Trains each planted benchmark of ``benchmarks/planted_benchmarks.py`` (one thread, small images, a few epochs),
runs ``analysis.failures.analyze`` on its last epoch and, on the same table, SliceLine, a Domino-style error-aware
mixture and plain cleanlab (``benchmarks/baselines.py``). Each cause is looked up with the dataset's own ground
truth:

- a cause with meta columns is **named** when a slice of Lantern's meta family names one of them and is made mostly
  of the cause's datapoints (half of the slice, or three times the cause's share of the epoch for a rare cause; a
  SliceLine slice likewise);
- any cause is **found as a group** when an entry of a list (a slice of either family, a subgroup, a systematic
  suspect group; a Domino component) is made mostly of its datapoints and holds at least 30% of them;
- label noise is scored by the precision of the top 10 label suspects, beside plain cleanlab's;
- NaN by the NaN origin list, a dead channel by the dead-unit list.

Targets (issue 26): every cause whose datapoints fail at least 1.5x the rest is named in the top 3 of its family
or found as a group in the top 3 of its list; no distractor meta column in any top 5; label precision at 10 at
least plain cleanlab's. ``--default-example`` also trains ``configs/examples/cnn_trainer.py`` and prints its top
findings: their top 3 must name ``occluded`` (its real mark), not a restatement of the failure.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch

from analysis.epoch_table import EpochTable
from analysis.failures import Findings, analyze, resolve_epoch_dir
from analysis.internals import read_internals
from benchmarks.baselines import FoundGroup, cleanlab_suspects, domino_slices, sliceline_slices
from benchmarks.planted_benchmarks import BENCHMARKS, Benchmark, Cause, default_example, validation_dataset
from run_dir.names import EPOCH_TABLE_FILE
from runners.trainers import BaseTrainer

TARGET = 3
DISTRACTOR_TOP = 5
RATIO = 1.5  # a cause failing this many times the rest must be found


@dataclass
class Ranks:
    """Where one cause is, for each finder (None: not found)."""

    cause: str
    fail_ratio: float
    lantern_named: Optional[str] = None  # 'meta #1'
    lantern_group: Optional[str] = None  # 'subgroups #1'
    sliceline: Optional[int] = None
    domino: Optional[int] = None
    must_find: bool = False

    @property
    def met(self) -> bool:
        return not self.must_find or any(rank is not None and int(rank.split("#")[1]) <= TARGET
                                         for rank in (self.lantern_named, self.lantern_group))


def train(config: dict[str, Any]) -> float:
    """Train ``config`` on one thread (a 2-core machine shared by others); the seconds it took."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    start = time.perf_counter()
    try:
        BaseTrainer(config).run()
    finally:
        torch.set_num_threads(threads)
    return time.perf_counter() - start


def evaluate(benchmark: Benchmark, findings: Findings, baselines: bool = True) -> dict[str, Any]:
    """Each cause's ranks for every finder (``baselines=False``: Lantern's and plain cleanlab's only), the label
    precisions and the distractors seen, on one trained run."""
    epoch_dir = resolve_epoch_dir(benchmark.config["work_dir"], None)
    table = EpochTable(os.path.join(epoch_dir, EPOCH_TABLE_FILE))
    values = table.values([name for name, _ in table.columns()] + ["probabilities"])
    idx, failed = values["idx"], values["label"] != values["prediction"]
    causes = benchmark.causes(validation_dataset(benchmark.config))
    skipped = {"idx", "label", "prediction", "prediction_name", "logsumexp", *table.roles.get("scores", [])}
    table_columns = {name: column for name, column in values.items() if name not in skipped and column.ndim == 1}
    min_size = max(10, int(np.ceil(0.01 * len(idx))))
    sliceline = sliceline_slices(table_columns, failed, min_size) if baselines else []
    spaces = read_internals(epoch_dir).vectors if baselines else {}
    domino = []
    if spaces:
        space_idx, vectors = max(spaces.values(), key=lambda pair: len(pair[0]))
        rows = np.searchsorted(idx, space_idx)
        usable = np.isfinite(vectors).all(axis=1) & np.isfinite(values["probabilities"][rows]).all(axis=1)
        rows, vectors = rows[usable], vectors[usable]  # Domino models finite embeddings and probabilities only
        domino = [FoundGroup(g.description, g.columns, rows[g.rows]) for g in
                  domino_slices(vectors, values["label"][rows], values["probabilities"][rows], failed[rows])]
    failed_idx = set(idx[failed].tolist())
    ranks = [_cause_ranks(cause, findings, idx, failed_idx, sliceline, domino) for cause in causes
             if cause.kind == "group"]
    flipped = set().union(*[cause.idx for cause in causes if cause.kind == "labels"]) if \
        any(cause.kind == "labels" for cause in causes) else set()
    plain = idx[cleanlab_suspects(values["label"], values["probabilities"])[:10]]
    return {"ranks": ranks,
            "label precision": (_precision([issue.idx for issue in findings.label_issues[:10]], flipped),
                                _precision(plain.tolist(), flipped)) if flipped else None,
            "other": _other_causes(causes, findings),
            "distractors": _distractors(findings, sliceline, benchmark.distractors),
            "failures": (int(failed.sum()), len(idx)), "outside": _outside_rate(causes, idx, failed)}


def _outside_rate(causes: list[Cause], idx: np.ndarray, failed: np.ndarray) -> float:
    """The failure rate of the datapoints no planted cause touches: how well the model learns the rest (the issue
    asks for at most 15%, so that the causes stand out)."""
    touched = np.isin(idx, list(set().union(*[cause.idx for cause in causes])))
    return float(failed[~touched].mean())


def _cause_ranks(cause: Cause, findings: Findings, idx: np.ndarray, failed_idx: set[int],
                 sliceline: list[FoundGroup], domino: list[FoundGroup]) -> Ranks:
    inside = len(cause.idx & failed_idx) / max(len(cause.idx), 1)
    rest = len(failed_idx - cause.idx) / max(len(idx) - len(cause.idx), 1)
    ratio = inside / rest if rest else float("inf")
    result = Ranks(cause.name, ratio, must_find=ratio >= RATIO)
    lists = {"meta": [(s.idx, [c.column for c in s.conditions]) for s in findings.meta.slices],
             "internals": [(s.idx, [c.column for c in s.meta_match.conditions] if s.meta_match else [])
                           for s in findings.internals.slices],
             "subgroups": [(g.idx, [c.column for c in g.meta_match.conditions] if g.meta_match else [])
                           for g in findings.subgroups],
             "suspect groups": [(g.idx, []) for g in findings.suspect_groups]}
    share = len(cause.idx) / len(idx)
    for name, entries in lists.items():
        named = _first(_mostly(set(rows.tolist()), cause, share) and bool(set(columns) & set(cause.columns))
                       for rows, columns in entries) if cause.columns else None
        group = _first(_group(set(rows.tolist()), cause, share) for rows, _ in entries)
        result.lantern_named = result.lantern_named or (f"{name} #{named}" if named else None)
        result.lantern_group = result.lantern_group or (f"{name} #{group}" if group else None)
    result.sliceline = _first(_mostly(set(idx[g.rows].tolist()), cause, share) and
                              (bool(set(g.columns) & set(cause.columns)) or _group(set(idx[g.rows].tolist()), cause,
                                                                                  share)) for g in sliceline)
    result.domino = _first(_group(set(idx[g.rows].tolist()), cause, share) for g in domino)
    return result


def _mostly(rows: set[int], cause: Cause, share: float) -> bool:
    """Half of ``rows`` are the cause's, or, for a rare cause, three times its share of the epoch."""
    return len(rows & cause.idx) >= min(0.5, 3 * share) * max(len(rows), 1)


def _group(rows: set[int], cause: Cause, share: float) -> bool:
    return _mostly(rows, cause, share) and len(rows & cause.idx) >= 0.3 * len(cause.idx)


def _first(hits: Any) -> Optional[int]:
    return next((rank for rank, hit in enumerate(hits, start=1) if hit), None)


def _precision(chosen: list[int], flipped: set[int]) -> float:
    return sum(i in flipped for i in chosen) / max(len(chosen), 1)


def _other_causes(causes: list[Cause], findings: Findings) -> dict[str, Optional[int]]:
    """Ranks of the NaN and dead-channel causes in their lists."""
    found = {}
    for cause in causes:
        if cause.kind == "nan":
            found[cause.name] = _first(o.module == cause.module or o.module.startswith(cause.module + ".")
                                       for o in findings.nan_origins)
        elif cause.kind == "dead":
            found[cause.name] = _first(unit.column == cause.column for unit in findings.dead_units)
    return found


def _distractors(findings: Findings, sliceline: list[FoundGroup], distractors: tuple[str, ...]
                 ) -> dict[str, list[str]]:
    """Every top-5 entry (of any list) whose words name a distractor column, per finder."""
    def named(text: str) -> bool:
        return any(f"{column} " in f"{text} " for column in distractors)
    texts = []
    for family in (findings.meta, findings.internals):
        for found in family.slices[:DISTRACTOR_TOP]:
            texts += [found.description, *found.also, found.meta_match.description if found.meta_match else ""]
        for separator in family.separators[:DISTRACTOR_TOP]:
            texts += [separator.column, separator.meta_match.description if separator.meta_match else ""]
    for group in [*findings.subgroups[:DISTRACTOR_TOP], *findings.suspect_groups[:DISTRACTOR_TOP]]:
        texts.append(group.meta_match.description if group.meta_match else "")
    return {"lantern": [text for text in texts if named(text)],
            "sliceline": [g.description for g in sliceline[:DISTRACTOR_TOP] if named(g.description)]}


def report(name: str, result: dict[str, Any], seconds: tuple[float, float]) -> bool:
    """Print one benchmark's table; whether every target is met."""
    failures, rows = result["failures"]
    print(f"\n== {name}: {failures} of {rows} fail ({result['outside']:.1%} of those no planted cause touches); "
          f"training {seconds[0]:.0f} s, analysis {seconds[1]:.1f} s")
    print(f"{'cause':44s} {'fail x':>6s}  {'Lantern named':16s} {'Lantern group':18s} {'SliceLine':>9s} "
          f"{'Domino':>6s}  target")
    met = True
    for r in result["ranks"]:
        verdict = ("ok" if r.met else "MISSED") if r.must_find else "(fails < 1.5x the rest)"
        met &= r.met
        print(f"{r.cause[:44]:44s} {r.fail_ratio:6.1f}  {r.lantern_named or '-':16s} {r.lantern_group or '-':18s} "
              f"{r.sliceline or '-':>9} {r.domino or '-':>6}  {verdict}")
    for cause, rank in result["other"].items():
        ok = rank is not None and rank <= TARGET
        met &= ok
        print(f"{cause[:44]:44s} {'':6s}  {'#' + str(rank) if rank else '-':16s} {'':18s} {'':>9s} {'':>6s}  "
              f"{'ok' if ok else 'MISSED'}")
    if result["label precision"] is not None:
        ours, plain = result["label precision"]
        met &= ours >= plain
        print(f"label suspects, precision at 10: Lantern {ours:.1f}, plain cleanlab {plain:.1f}  "
              f"{'ok' if ours >= plain else 'MISSED'}")
    for finder, texts in result["distractors"].items():
        met &= finder != "lantern" or not texts
        print(f"distractor columns in a top {DISTRACTOR_TOP} ({finder}): {len(texts)} {texts[:3] if texts else ''}")
    return met


def default_example_report(work_dir: str) -> None:
    """Train the README's example and print its top findings, with what they name."""
    config = default_example(work_dir)
    seconds = train(config)
    findings = analyze(work_dir)
    restated = {r.column for r in findings.restatements}
    print(f"\n== default example (configs/examples/cnn_trainer.py): {findings.failures} of {findings.datapoints} "
          f"fail; training {seconds:.0f} s")
    for title, family in (("meta", findings.meta), ("internals", findings.internals)):
        for i, found in enumerate(family.slices[:TARGET], start=1):
            print(f"  {title} slice #{i}: {found.description} ({found.size} datapoints, {found.failure_rate:.0%} "
                  f"fail, rest {found.rest_failure_rate:.0%})")
        for i, separator in enumerate(family.separators[:TARGET], start=1):
            print(f"  {title} separator #{i}: {separator.column} (AUROC {separator.auroc:.3f})")
    named = [c.column for s in findings.meta.slices[:TARGET] for c in s.conditions]
    top = named + [c.column for s in findings.internals.slices[:TARGET] for c in s.conditions]
    print(f"  restatements kept apart: {sorted(restated)}")
    print(f"  top 3 name occluded: {'occluded' in named}; a restatement in a top 3: {bool(restated & set(top))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="+", default=["planted", "sites", "shortcuts"], choices=list(BENCHMARKS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="shift every benchmark's seeds by these")
    parser.add_argument("--held-out", action="store_true", help="the held-out variants (look only at the end)")
    parser.add_argument("--default-example", action="store_true", help="also train and report cnn_trainer.py")
    parser.add_argument("--small", action="store_true", help="the planted benchmark's small version (the tests')")
    parser.add_argument("--work-dir", default=None, help="train here (kept); default: a temporary folder")
    args = parser.parse_args()
    all_met = True
    with tempfile.TemporaryDirectory() as scratch:
        root = args.work_dir or scratch
        for seed in args.seeds:
            for name in args.benchmarks:
                options = {"held_out": args.held_out, "seed": seed}
                if name == "planted":
                    options["small"] = args.small
                benchmark = BENCHMARKS[name](os.path.join(root, f"{name}_{seed}"), **options)
                trained = train(benchmark.config)
                start = time.perf_counter()
                findings = analyze(benchmark.config["work_dir"])
                analysed = time.perf_counter() - start
                all_met &= report(f"{benchmark.name}, seed shift {seed}", evaluate(benchmark, findings),
                                  (trained, analysed))
        if args.default_example:
            default_example_report(os.path.join(root, "default_example"))
    print(f"\nevery target met: {all_met}")


if __name__ == "__main__":
    main()
