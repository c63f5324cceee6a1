"""Every finding in a user's terms and with its target: internal findings described by the meta conditions that best
match their datapoints, a group found by several families reported once, and what an intervention would act on.

- An internal slice, separating quantity or subgroup gets its best meta match (``analysis/meta_terms.py``); a
  separating quantity stands for its failure side: as many datapoints as fail, at its most failure-like values.
- An internal slice or a subgroup whose datapoints are those of a reported meta slice (Jaccard >= 0.5), or mostly
  inside it (80%) and failing no more than the rest of it, is that slice seen inside the model: it is listed under
  the meta slice (``inside_model``), not again on its own. One mostly inside it that fails more than the rest of it
  is a group of its own (the failing third of site C), listed with its meta match.
- A slice of missing values that a NaN origin accounts for (Jaccard >= 0.8) names that module.
- Targets (``findings.Target``): a meta finding's conditions; an internal one's debugger, layer (the table's
  ``layers`` role), units (the numbers that end its columns' names) and meta conditions; ``region='cam'`` when its
  columns are where a cam points (role ``input_region``).
"""

from __future__ import annotations

import re
from typing import Optional

import numpy as np

from analysis.findings import Condition, Findings, MetaMatch, Slice, Target
from analysis.meta_terms import MetaVocabulary
from analysis.separators import failing_side
from analysis.slices import ALPHA, fails_more

SAME_GROUP = 0.5
EXAMPLES = 5
MOSTLY_INSIDE = 0.8
SAME_AS_NAN = 0.8
_UNIT_NUMBER = re.compile(r"(\d+)$")


def explain(findings: Findings, values: dict[str, np.ndarray], failed: np.ndarray, vocabulary: MetaVocabulary,
            layers: dict[str, str], regions: set[str]) -> None:
    """Give every finding its target, every internal one its meta match; fold restatements across families."""
    idx = values["idx"]
    for found in findings.meta.slices:
        found.target = Target(conditions=list(found.conditions))
    share = float(failed.mean())
    for separator in findings.meta.separators:
        side = failing_side(values[separator.column], separator.direction, share)
        cut = values[separator.column][side]
        higher = separator.direction.startswith("higher")
        value = float(np.min(cut) if higher else np.max(cut)) if len(cut) else None
        op = ">=" if higher else "<"
        separator.target = Target(conditions=[Condition(separator.column, op, value)] if value is not None else [])
    for found in findings.internals.slices:
        found.meta_match = vocabulary.best_match(rows_of(idx, found.idx))
        columns = [name for c in found.conditions for name in (c.column, *c.same_on)]
        found.target = _internal_target(columns, layers, regions, found.meta_match)
        found.examples = _typical(found, values, failed)
    for separator in findings.internals.separators:
        column = separator.units[0].column if separator.units else separator.column
        separator.meta_match = vocabulary.best_match(failing_side(values[column], separator.direction, share))
        columns = [unit.column for unit in separator.units] or [separator.column]
        separator.target = _internal_target(columns, layers, regions, separator.meta_match)
    _link_nan_origins(findings, idx)
    _fold_into_meta(findings, idx, failed)


def rows_of(table_idx: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The bool mask of the table rows (sorted ``table_idx``) that hold ``idx``."""
    mask = np.zeros(len(table_idx), dtype=bool)
    mask[np.searchsorted(table_idx, idx)] = True
    return mask


def _typical(found: Slice, values: dict[str, np.ndarray], failed: np.ndarray) -> list[int]:
    """The slice's EXAMPLES failing datapoints furthest past its first condition's threshold (the first ones, for a
    condition without one): what to open when no meta column describes it."""
    rows = np.flatnonzero(rows_of(values["idx"], found.idx) & failed)
    condition = found.conditions[0]
    if condition.op in ("<", ">="):
        distance = values[condition.column][rows].astype(np.float64) - condition.value
        rows = rows[np.argsort(distance if condition.op == "<" else -distance, kind="stable")]
    return values["idx"][rows[:EXAMPLES]].tolist()


def _internal_target(columns: list[str], layers: dict[str, str], regions: set[str],
                     match: Optional[MetaMatch]) -> Target:
    debugger = columns[0].split(".", 1)[0]
    units = sorted({int(m.group(1)) for column in columns if (m := _UNIT_NUMBER.search(column.split(".", 1)[-1]))})
    return Target(conditions=list(match.conditions) if match else [], debugger=debugger, layer=layers.get(debugger),
                  units=units, region="cam" if any(column in regions for column in columns) else None)


def _link_nan_origins(findings: Findings, idx: np.ndarray) -> None:
    for found in findings.internals.slices:
        if not any(condition.op == "is null" for condition in found.conditions):
            continue
        best = max(findings.nan_origins, key=lambda origin: _jaccard(origin.idx, found.idx), default=None)
        if best is not None and _jaccard(best.idx, found.idx) >= SAME_AS_NAN:
            found.nan_origin = best.module
            found.target.layer = best.module


def _fold_into_meta(findings: Findings, idx: np.ndarray, failed: np.ndarray) -> None:
    """Internal slices and subgroups that restate a meta slice go under it, not in their own lists: those with its
    datapoints (Jaccard >= SAME_GROUP), and those mostly inside it (MOSTLY_INSIDE of their datapoints) that fail no
    more than the rest of it (one-sided Fisher exact test at 0.05 over the findings tested): a piece of one
    cause, cut out by noise in a summary, is that cause again."""
    candidates = [*findings.internals.slices, *findings.subgroups]
    level = ALPHA / max(len(candidates), 1)

    def folded(found_idx: np.ndarray, description: str) -> bool:
        match = _restated(findings.meta.slices, found_idx, idx, failed, level)
        if match is not None:
            match.inside_model.append(description)
        return match is not None
    findings.internals.slices = [s for s in findings.internals.slices if not folded(s.idx, s.description)]
    findings.subgroups = [g for g in findings.subgroups
                          if not folded(g.idx, f"a subgroup of {g.size} in {g.debugger}")]


def _restated(slices: list[Slice], found_idx: np.ndarray, idx: np.ndarray, failed: np.ndarray,
              level: float) -> Optional[Slice]:
    """The meta slice that ``found_idx`` restates, if any."""
    for meta in sorted(slices, key=lambda found: -_jaccard(found.idx, found_idx)):
        if _jaccard(meta.idx, found_idx) >= SAME_GROUP:
            return meta
        shared = np.intersect1d(meta.idx, found_idx, assume_unique=True)
        if len(shared) < MOSTLY_INSIDE * len(found_idx):
            continue
        inside, rest = rows_of(idx, shared), rows_of(idx, meta.idx)
        rest &= ~inside
        if not fails_more(int((inside & failed).sum()), int(inside.sum()), int((rest & failed).sum()),
                          int(rest.sum()), level):
            return meta
    return None


def _jaccard(a: np.ndarray, b: np.ndarray) -> float:
    shared = len(np.intersect1d(a, b, assume_unique=True))
    union = len(a) + len(b) - shared
    return shared / union if union else 0.0
