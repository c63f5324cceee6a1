"""Does the failure analysis find causes planted on purpose, where other finders do? Each cause's rank, side by side.

    python -m benchmarks.failure_discovery [--benchmarks planted sites shortcuts signals sequences] [--seeds 0 1]
                                           [--held-out] [--default-example] [--real] [--small] [--work-dir DIR]
                                           [--reuse]

Trains each planted benchmark of ``benchmarks/planted_benchmarks.py`` (one thread, small images, a few epochs),
runs ``analysis.failures.analyze`` on its last epoch and, on the same table, SliceLine, a Domino-style error-aware
mixture and plain cleanlab (``benchmarks/baselines.py``). Each cause is looked up with the dataset's own ground
truth:

- a cause with meta columns is **named** when a slice of Lantern's meta family names one of them and is made mostly
  of the cause's datapoints (half of the slice, or three times the cause's share of the epoch for a rare cause; a
  SliceLine slice likewise);
- any cause is **found as a group** when an entry of a list (a slice of either family, a subgroup, a systematic
  suspect group, a systematic training-label group; a Domino component) is made mostly of its datapoints and holds
  at least 30% of them;
- label noise is scored by the precision of the top 10 label suspects, beside plain cleanlab's;
- NaN by the NaN origin list, a dead channel by the dead-unit list.

Targets: every cause whose datapoints fail at least 1.5x the rest is named in the top 3 of its family
or found as a group in the top 3 of its list; no distractor meta column in any top 5; label precision at 10 at
least plain cleanlab's. ``--default-example`` also trains ``configs/examples/cnn_trainer.py`` and prints its top
findings: their top 3 must name ``occluded`` (its real mark), not a restatement of the failure.

Systematic errors told from noise (the second table of each benchmark): a group whose training labels name another
class (``kind='systematic'``) and a rare input variant (``kind='variant'``) must each be found as a group in the
top 3 of its list, by an entry at least half of which is its own and which holds 30% of it (for every finder: a
slice on its class alone, or a meta slice merely naming it, does not count), and stay out of the individual label
suspects: at most ``MAX_MEMBERS`` of its members (those not also flipped) in Lantern's top 10 and top 50 (the top
50 from an analysis with ``top=50``, as ``--top 50`` prints), beside plain cleanlab's count. On a benchmark holding both
kinds, the label suspects' precision at 10 on the random flips must reach ``FLIP_PRECISION``. A cause that holds
for every label past a value of one column must be cut there: the first meta slice on its column within
``THRESHOLD_TOLERANCE`` of the column's range of the planted value, on the same side, with no label condition
(SliceLine's first slice on the column beside it). Under each systematic group and rare variant: how far its
failures stand apart from the other failures in each captured space (``own_neighbours``; near chance, no finder that
gathers failures by their neighbours there finds it whole).
``--reuse`` analyses the finished runs of an earlier ``--work-dir`` again without training them.

``--real`` trains ``configs/examples/digits_trainer.py`` (scikit-learn's digits, nothing planted) and a weaker run
of it on 550 of its training images, and prints each one's accuracy and the report of ``python -m runners.analyze``,
for a person to judge by looking at the datapoints each finding names, and how many of the top-10 label suspects
(Lantern's, plain cleanlab's) a second, independent model contradicts too (``independent_check``).
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
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import NearestNeighbors

from analysis.columns import LABEL
from analysis.epoch_table import EpochTable
from analysis.failures import Findings, analyze, resolve_epoch_dir
from analysis.internals import read_internals
from analysis.subgroups import reduced_space
from benchmarks.baselines import FoundGroup, cleanlab_suspects, domino_slices, sliceline_slices
from benchmarks.planted_benchmarks import (
    BENCHMARKS,
    GROUP_KINDS,
    Benchmark,
    Cause,
    default_example,
    digits,
    validation_dataset,
)
from run_dir import RunDir
from run_dir.names import EPOCH_TABLE_FILE
from runners import analyze as analyze_command
from runners.trainers import BaseTrainer
from utils.builders import build_from_config

TARGET = 3
DISTRACTOR_TOP = 5
RATIO = 1.5  # a cause failing this many times the rest must be found
GROUPED = ("systematic", "variant")  # found only as a group, never as label suspects
SUSPECT_TOPS = (10, 50)
MAX_MEMBERS = (1, 5)  # of a systematic group or a rare variant, in the label suspects' top 10 and top 50
FLIP_PRECISION = 0.8
THRESHOLD_TOLERANCE = 0.05  # a found threshold's distance from the planted one, as a share of the column's range
FOLDS = 5  # the independent model's fits on the digits' training split
OWN_NEIGHBOURS = 5  # nearest other failures looked at for each failure of a grouped cause (own_neighbours)


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
    kind: str = "group"
    suspects: Optional[tuple[int, ...]] = None  # a grouped kind's members among Lantern's label suspects, per top
    cleanlab: Optional[tuple[int, ...]] = None  # among plain cleanlab's
    apart: Optional[dict[str, tuple[float, float]]] = None  # a grouped kind's own_neighbours per captured space

    @property
    def named_or_grouped(self) -> bool:
        """Named or found as a group in a top 3, or not failing enough to be asked."""
        return not self.must_find or _in_top(self.lantern_named, self.lantern_group)

    @property
    def found(self) -> bool:
        """In a top 3: named or found as a group; a systematic group or a rare variant as a group only."""
        return _in_top(self.lantern_group) if self.kind in GROUPED else _in_top(self.lantern_named,
                                                                              self.lantern_group)

    @property
    def kept_out(self) -> bool:
        """Its members stay out of the label suspects (a group that is not label noise)."""
        return self.suspects is None or all(n <= most for n, most in zip(self.suspects, MAX_MEMBERS))

    @property
    def met(self) -> bool:
        return (not self.must_find or self.found) and self.kept_out


def _in_top(*ranks: Optional[str]) -> bool:
    """Whether any of the ranks ('subgroups #2') is in the top ``TARGET``."""
    return any(rank is not None and int(rank.split("#")[1]) <= TARGET for rank in ranks)


@dataclass
class Threshold:
    """Where a threshold cause was cut: by Lantern's first meta slice on its column, and by SliceLine's."""

    cause: str
    planted: str
    lantern: Optional[str] = None  # 'meta #2: cable_m >= 33.1'
    sliceline: Optional[str] = None
    met: bool = False


def train_unless_done(config: dict[str, Any], reuse: bool) -> float:
    """``train(config)``, unless ``reuse`` and its work dir holds a run that completed every epoch (the analysis
    alone is rerun: 0 seconds of training)."""
    run = RunDir(config["work_dir"])
    if reuse and os.path.isfile(run.progress) and run.read_progress().get("completed_epochs") == config["epochs"]:
        return 0.0
    return train(config)


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


def evaluate(benchmark: Benchmark, findings: Findings, baselines: bool = True,
             wide_suspects: Optional[list[int]] = None) -> dict[str, Any]:
    """Each cause's ranks for every finder (``baselines=False``: Lantern's and plain cleanlab's only), the label
    precisions, the thresholds and the distractors seen, on one trained run. ``wide_suspects``: the label suspects
    (dataset idx, best first) of an analysis with a longer list, for the top 50; None: ``findings``' own."""
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
             if cause.kind in GROUP_KINDS]
    for rank, cause in zip(ranks, [cause for cause in causes if cause.kind in GROUP_KINDS]):
        if rank.kind in GROUPED and spaces:
            rank.apart = {space: own_neighbours(reduced_space(vectors), np.isin(space_idx, list(cause.idx)),
                                                failed[np.searchsorted(idx, space_idx)])
                          for space, (space_idx, vectors) in spaces.items()}
    flipped = set().union(*[cause.idx for cause in causes if cause.kind == "labels"]) if \
        any(cause.kind == "labels" for cause in causes) else set()
    plain = idx[cleanlab_suspects(values["label"], values["probabilities"])].tolist()
    ours = [issue.idx for issue in findings.label_issues]
    _suspect_counts(ranks, causes, flipped, (ours, wide_suspects or ours), (plain, plain))
    kinds = {cause.kind for cause in causes}
    return {"ranks": ranks,
            "label precision": (_precision(ours[:10], flipped), _precision(plain[:10], flipped)) if flipped else None,
            "flip target": FLIP_PRECISION if set(GROUPED) <= kinds and flipped else None,
            "thresholds": [_threshold(cause, findings, sliceline, values) for cause in causes if cause.threshold],
            "other": _other_causes(causes, findings),
            "distractors": _distractors(findings, sliceline, benchmark.distractors),
            "failures": (int(failed.sum()), len(idx)), "outside": _outside_rate(causes, idx, failed)}


def own_neighbours(vectors: np.ndarray, cause: np.ndarray, failed: np.ndarray) -> tuple[float, float]:
    """How far a cause's failures stand apart from the other failures in one captured space (``vectors``, one row
    per datapoint; ``cause`` and ``failed``: masks over them): the share of the ``OWN_NEIGHBOURS`` nearest other
    failures of each of its failures that are its own too, and that share by chance (its other failures among all
    other failures). Near chance, no finder that gathers failures by their neighbours in that space can find it
    whole: whatever the model does with it there, it does with other failures too."""
    rows = np.flatnonzero(failed & np.isfinite(vectors).all(axis=1))
    own = cause[rows]
    if own.sum() < 2 or len(rows) <= OWN_NEIGHBOURS:
        return float("nan"), float("nan")
    found = NearestNeighbors(n_neighbors=OWN_NEIGHBOURS + 1).fit(vectors[rows]).kneighbors(vectors[rows[own]])[1]
    itself = found == np.flatnonzero(own)[:, None]
    drop = np.where(itself.any(axis=1), itself.argmax(axis=1), OWN_NEIGHBOURS)  # a duplicate may come first
    keep = np.ones(found.shape, dtype=bool)
    keep[np.arange(len(found)), drop] = False
    neighbours = found[keep].reshape(len(found), OWN_NEIGHBOURS)
    return float(own[neighbours].mean()), float((own.sum() - 1) / (len(rows) - 1))


def _suspect_counts(ranks: list[Ranks], causes: list[Cause], flipped: set[int], ours: tuple[list[int], list[int]],
                    plain: tuple[list[int], list[int]]) -> None:
    """Set each grouped cause's members (not also flipped) among the top 10 and top 50 label suspects, Lantern's
    (``ours``: the lists to take each top from) and plain cleanlab's."""
    by_name = {cause.name: cause for cause in causes}
    for rank in ranks:
        if rank.kind in GROUPED:
            members = by_name[rank.cause].idx - flipped
            rank.suspects = tuple(len(members & set(chosen[:top])) for chosen, top in zip(ours, SUSPECT_TOPS))
            rank.cleanlab = tuple(len(members & set(chosen[:top])) for chosen, top in zip(plain, SUSPECT_TOPS))


def _threshold(cause: Cause, findings: Findings, sliceline: list[FoundGroup], values: dict[str, np.ndarray]
               ) -> Threshold:
    """Lantern's first meta slice on the cause's column (met: cut on the planted side, within the tolerance, with
    no label condition) and SliceLine's first slice on it."""
    column, op, value = cause.threshold
    found = Threshold(cause.name, f"{column} {op} {value:g}")
    numbers = values[column].astype(np.float64)
    tolerance = THRESHOLD_TOLERANCE * float(np.nanmax(numbers) - np.nanmin(numbers))
    for rank, found_slice in enumerate(findings.meta.slices, start=1):
        cut = next((c for c in found_slice.conditions if c.column == column), None)
        if cut is None:
            continue
        found.lantern = f"meta #{rank}: {found_slice.description}"
        labelled = any(c.column in LABEL for c in found_slice.conditions)
        found.met = cut.op == op and abs(float(cut.value) - value) <= tolerance and not labelled
        break
    found.sliceline = next((g.description for g in sliceline if column in g.columns), None)
    return found


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
    result = Ranks(cause.name, ratio, must_find=ratio >= RATIO, kind=cause.kind)
    lists = {"meta": [(s.idx, [c.column for c in s.conditions]) for s in findings.meta.slices],
             "inputs": [(s.idx, []) for s in findings.inputs.slices],
             "internals": [(s.idx, [c.column for c in s.meta_match.conditions] if s.meta_match else [])
                           for s in findings.internals.slices],
             "subgroups": [(g.idx, [c.column for c in g.meta_match.conditions] if g.meta_match else [])
                           for g in findings.subgroups],
             "suspect groups": [(g.idx, []) for g in findings.suspect_groups],
             "training-label groups": [(g.idx, [c.column for c in g.meta_match.conditions] if g.meta_match else [])
                                       for g in findings.training_label_groups]}
    grouped = cause.kind in GROUPED
    # a systematic group or a rare variant counts only where an entry is at least half of it: a slice on its class
    # alone holds it at three times its share and says nothing of it
    share = 1.0 if grouped else len(cause.idx) / len(idx)
    for name, entries in lists.items():
        named = _first(_mostly(set(rows.tolist()), cause, share) and bool(set(columns) & set(cause.columns))
                       for rows, columns in entries) if cause.columns else None
        group = _first(_group(set(rows.tolist()), cause, share) for rows, _ in entries)
        result.lantern_named = result.lantern_named or (f"{name} #{named}" if named else None)
        result.lantern_group = result.lantern_group or (f"{name} #{group}" if group else None)
    result.sliceline = _first(_mostly(set(idx[g.rows].tolist()), cause, share) and
                              (bool(set(g.columns) & set(cause.columns)) and not grouped
                               or _group(set(idx[g.rows].tolist()), cause, share)) for g in sliceline)
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
    for family in (findings.meta, findings.inputs, findings.internals):
        for found in family.slices[:DISTRACTOR_TOP]:
            texts += [found.description, *found.also, found.meta_match.description if found.meta_match else ""]
        for separator in family.separators[:DISTRACTOR_TOP]:
            texts += [separator.column, separator.meta_match.description if separator.meta_match else ""]
    for group in [*findings.subgroups[:DISTRACTOR_TOP], *findings.suspect_groups[:DISTRACTOR_TOP],
                  *findings.training_label_groups[:DISTRACTOR_TOP]]:
        texts.append(group.meta_match.description if group.meta_match else "")
    return {"lantern": [text for text in texts if named(text)],
            "sliceline": [g.description for g in sliceline[:DISTRACTOR_TOP] if named(g.description)]}


def report(name: str, result: dict[str, Any], seconds: tuple[float, float]) -> bool:
    """Print one benchmark's table; whether every target is met."""
    failures, rows = result["failures"]
    print(f"\n== {name}: {failures} of {rows} fail ({result['outside']:.1%} of those no planted cause touches); "
          f"training {seconds[0]:.0f} s, analysis {seconds[1]:.1f} s")
    print(f"{'cause':44s} {'fail x':>6s}  {'Lantern named':16s} {'Lantern group':26s} {'SliceLine':>9s} "
          f"{'Domino':>6s}  target")
    met = True
    for r in result["ranks"]:
        verdict = ("ok" if r.named_or_grouped else "MISSED") if r.must_find else "(fails < 1.5x the rest)"
        met &= r.named_or_grouped
        print(f"{r.cause[:44]:44s} {r.fail_ratio:6.1f}  {r.lantern_named or '-':16s} {r.lantern_group or '-':26s} "
              f"{r.sliceline or '-':>9} {r.domino or '-':>6}  {verdict}")
    for cause, rank in result["other"].items():
        ok = rank is not None and rank <= TARGET
        met &= ok
        print(f"{cause[:44]:44s} {'':6s}  {'#' + str(rank) if rank else '-':16s} {'':26s} {'':>9s} {'':>6s}  "
              f"{'ok' if ok else 'MISSED'}")
    if result["label precision"] is not None:
        ours, plain = result["label precision"]
        met &= ours >= plain
        print(f"label suspects, precision at 10: Lantern {ours:.1f}, plain cleanlab {plain:.1f}  "
              f"{'ok' if ours >= plain else 'MISSED'}")
    for finder, texts in result["distractors"].items():
        met &= finder != "lantern" or not texts
        print(f"distractor columns in a top {DISTRACTOR_TOP} ({finder}): {len(texts)} {texts[:3] if texts else ''}")
    return _report_told_apart(result) and met


def _report_told_apart(result: dict[str, Any]) -> bool:
    """Print the systematic groups and rare variants (found as a group? among the label suspects?), the label
    precision on the random flips and the thresholds; whether their targets are met."""
    grouped = [r for r in result["ranks"] if r.kind in GROUPED]
    met = True
    if grouped:
        print(f"\n{'systematic group / rare variant':44s} {'kind':10s} {'Lantern group':26s} "
              f"{'suspects top 10/50: Lantern':>28s} {'cleanlab':>9s} {'Domino':>6s}  target")
    for r in grouped:
        met &= r.met
        print(f"{r.cause[:44]:44s} {r.kind:10s} {r.lantern_group or '-':26s} {_counts(r.suspects):>28s} "
              f"{_counts(r.cleanlab):>9s} {r.domino or '-':>6}  {_verdict(r)}")
        if r.apart:
            print(f"  its failures' {OWN_NEIGHBOURS} nearest other failures that are its own (chance): " + ", ".join(
                f"{space} {share:.0%} ({chance:.0%})" for space, (share, chance) in r.apart.items()))
    if result["flip target"] is not None and result["label precision"] is not None:
        ours, plain = result["label precision"]
        ok = ours >= result["flip target"]
        met &= ok
        print(f"label suspects on the random flips, precision at 10: Lantern {ours:.1f}, plain cleanlab {plain:.1f} "
              f"(target {result['flip target']:.1f})  {'ok' if ok else 'MISSED'}")
    for threshold in result["thresholds"]:
        met &= threshold.met
        print(f"threshold {threshold.planted}: Lantern {threshold.lantern or 'no slice on it'}; SliceLine "
              f"{threshold.sliceline or '-'}  {'ok' if threshold.met else 'MISSED'}")
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


def _counts(counts: Optional[tuple[int, ...]]) -> str:
    return " / ".join(map(str, counts)) if counts else "-"


def _verdict(ranks: Ranks) -> str:
    """What a grouped cause missed: found as a group in a top 3, kept out of the label suspects."""
    missed = ([] if ranks.found or not ranks.must_find else ["MISSED as a group"]) + \
        ([] if ranks.kept_out else ["IN THE SUSPECTS"])
    return ", ".join(missed) or ("ok" if ranks.must_find else "ok (fails < 1.5x the rest)")


def real_data_report(work_dir: str) -> None:
    """Train the digits example and its weaker run, and print each one's accuracy, its analysis report and how many
    of its top-10 label suspects an independent model contradicts too."""
    for weak in (False, True):
        benchmark = digits(os.path.join(work_dir, "digits_weak" if weak else "digits"), weak)
        seconds = train(benchmark.config)
        findings = analyze(benchmark.config["work_dir"])
        accuracy = 1 - findings.failures / findings.datapoints
        print(f"\n== {benchmark.name}: accuracy {accuracy:.1%} ({findings.failures} of {findings.datapoints} fail); "
              f"training {seconds:.0f} s\n")
        analyze_command.main(["--run", benchmark.config["work_dir"]])
        print(independent_check(benchmark, findings))


def independent_check(benchmark: Benchmark, findings: Findings) -> str:
    """How many of Lantern's top-10 label suspects, and of plain cleanlab's, a second model contradicts too: a
    logistic regression on the 8x8 pixels, its validation probabilities averaged over ``FOLDS`` fits that each leave
    out a fold of the training split (out-of-sample for validation, independent of the network)."""
    val, train_split = (build_from_config({**benchmark.config[key], "args": {
        **benchmark.config[key]["args"], "train_limit": None}}, key) for key in ("val_dataset", "train_dataset"))
    scans = load_digits()  # the images DigitsDataset's rows index
    pixels, labels = scans.data / 16.0, scans.target
    folds = np.array_split(np.random.default_rng(0).permutation(train_split.rows), FOLDS)
    probabilities = np.mean([LogisticRegression(max_iter=2000).fit(
        pixels[np.setdiff1d(train_split.rows, fold)], labels[np.setdiff1d(train_split.rows, fold)]).predict_proba(
        pixels[val.rows]) for fold in folds], axis=0)
    contradicts = probabilities.argmax(axis=1) != labels[val.rows]
    epoch_dir = resolve_epoch_dir(benchmark.config["work_dir"], None)
    values = EpochTable(os.path.join(epoch_dir, EPOCH_TABLE_FILE)).values(["idx", "label", "probabilities"])
    plain = values["idx"][cleanlab_suspects(values["label"], values["probabilities"])][:10].tolist()
    ours = [issue.idx for issue in findings.label_issues[:10]]
    accuracy = 1 - contradicts.mean()
    return (f"independent check (logistic regression on the pixels, {FOLDS} folds of the training split, validation "
            f"accuracy {accuracy:.1%}): it contradicts the label of {int(contradicts[ours].sum())} of Lantern's "
            f"{len(ours)} top label suspects {ours}, and of {int(contradicts[plain].sum())} of plain cleanlab's "
            f"{len(plain)} {plain}" + (f"; Lantern: {findings.label_issues_note}" if findings.label_issues_note
                                       else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="+", default=list(BENCHMARKS), choices=list(BENCHMARKS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="shift every benchmark's seeds by these")
    parser.add_argument("--held-out", action="store_true", help="the held-out variants (look only at the end)")
    parser.add_argument("--default-example", action="store_true", help="also train and report cnn_trainer.py")
    parser.add_argument("--real", action="store_true", help="also train the digits example (real data, nothing "
                                                            "planted) strong and weak, and print their reports")
    parser.add_argument("--small", action="store_true", help="the planted benchmark's small version (the tests')")
    parser.add_argument("--work-dir", default=None, help="train here (kept); default: a temporary folder")
    parser.add_argument("--reuse", action="store_true", help="analyse the finished runs already in --work-dir "
                                                             "instead of training them again")
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
                trained = train_unless_done(benchmark.config, args.reuse)
                start = time.perf_counter()
                findings = analyze(benchmark.config["work_dir"])
                analysed = time.perf_counter() - start
                wide = [issue.idx for issue in analyze(benchmark.config["work_dir"], top=SUSPECT_TOPS[-1]).label_issues]
                all_met &= report(f"{benchmark.name}, seed shift {seed}", evaluate(benchmark, findings,
                                                                                   wide_suspects=wide),
                                  (trained, analysed))
        if args.default_example:
            default_example_report(os.path.join(root, "default_example"))
        if args.real:
            real_data_report(root)
    print(f"\nevery target met: {all_met}")


if __name__ == "__main__":
    main()
