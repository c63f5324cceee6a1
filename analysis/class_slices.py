"""Slices within a class: a condition that makes one class fail significantly more than the rest of that class.

"Label 1 fails 38 % against 11 %" says which class fails; a practitioner's next question is which kind of 1: "among
the 1s, thickness >= 2.6: 65 % fail against 28 % of the other 1s". Over the whole table such a condition is drowned
by the other classes (thick 0s pass), so each class is searched on its own: ``find_slices`` over the meta columns but
the label's, on the class's datapoints only, one condition at a time (its cut searched on the column's values, as
any slice's), so a slice's rates are the class's: inside it, and in the rest of the class.

Significance: ALPHA is shared equally among the classes searched (Bonferroni), each search correcting over its
own conditions as the slice search does. The classes searched are those with at least ``min_size`` datapoints,
failing and passing ones, at most MAX_CLASSES of them (the most failures first). A slice whose datapoints are those
a reported meta slice holds of that class (Jaccard >= SAME_ROWS) is that slice again, and is left out. Where no
class has one, the report says which class and condition came closest, in numbers (``analysis/weak_evidence.py``).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Optional

import numpy as np

from analysis.explain import rows_of
from analysis.findings import ClassSlice, Condition, NoSlice, Slice, Target
from analysis.label_noise import class_name
from analysis.slices import ALPHA, find_slices
from analysis.weak_evidence import why_no_slice

MAX_CLASSES = 20
SAME_ROWS = 0.5


def class_slices(meta: dict[str, np.ndarray], label_columns: frozenset[str], values: dict[str, np.ndarray],
                 failed: np.ndarray, min_size: int, top: int, reported: list[Slice]
                 ) -> tuple[list[ClassSlice], Optional[NoSlice]]:
    """The ``top`` slices within a class (module docstring), best first (by the slice search's score); where there
    is none, why not: the class and condition that came closest (``why_no_slice``, None where no class was
    searched)."""
    if "label" not in values:
        return [], None
    labels, idx = values["label"], values["idx"]
    classes, sizes = np.unique(labels, return_counts=True)
    failures = np.array([int(failed[labels == c].sum()) for c in classes])
    searchable = (sizes >= min_size) & (failures > 0) & (failures < sizes)
    chosen = classes[searchable][np.argsort(-failures[searchable], kind="stable")][:MAX_CLASSES]
    searched = {name: column for name, column in meta.items() if name not in label_columns}
    if not len(chosen) or not searched:
        return [], None
    level = ALPHA / len(chosen)
    reported_rows = [rows_of(idx, found_slice.idx) for found_slice in reported]
    found = []
    for class_id in chosen:
        rows = labels == class_id
        label = _label_condition(values, class_id)
        theirs = [their_rows[rows] for their_rows in reported_rows]
        for inside in find_slices({name: column[rows] for name, column in searched.items()}, failed[rows], idx[rows],
                                  min_size, top, max_conditions=1, alpha=level):
            if not _restated(rows_of(idx[rows], inside.idx), theirs):
                found.append(ClassSlice(**{f.name: getattr(inside, f.name) for f in fields(Slice)}, label=label,
                                        class_size=int(rows.sum()), class_failure_rate=float(failed[rows].mean())))
                found[-1].target = Target(conditions=[label, *inside.conditions])
    if found:
        return sorted(found, key=lambda found_slice: -found_slice.score)[:top], None
    return [], _closest(chosen, searched, values, failed, min_size, level, reported_rows)


def _closest(classes: np.ndarray, searched: dict[str, np.ndarray], values: dict[str, np.ndarray],
             failed: np.ndarray, min_size: int, level: float, reported_rows: list[np.ndarray]) -> Optional[NoSlice]:
    """Of every class searched, the condition that came closest to a slice (the smallest p-value against its
    level; a reported meta slice seen within the class is no candidate), with its class."""
    closest = []
    for class_id in classes:
        rows = values["label"] == class_id
        theirs = [their_rows[rows] for their_rows in reported_rows]
        why = why_no_slice({name: column[rows] for name, column in searched.items()}, failed[rows], min_size,
                           alpha=level, max_conditions=1, known=lambda mask, theirs=theirs: _restated(mask, theirs))
        if why.condition is not None:
            why.within = _label_condition(values, class_id)
            closest.append(why)
    return min(closest, key=lambda why: np.log(max(why.p_value, 1e-300)) - np.log(why.level), default=None)


def _label_condition(values: dict[str, np.ndarray], class_id: int) -> Condition:
    """``label_name = <name>`` where the table names its classes, else ``label = <number>``."""
    if "label_name" in values:
        return Condition("label_name", "=", class_name(values, class_id))
    return Condition("label", "=", int(class_id))


def _restated(inside: np.ndarray, theirs: list[np.ndarray]) -> bool:
    """Whether a reported meta slice holds the same datapoints of the class as ``inside`` (both bool masks over the
    class's rows; Jaccard >= SAME_ROWS)."""
    for their_rows in theirs:
        union = int((their_rows | inside).sum())
        if union and int((their_rows & inside).sum()) / union >= SAME_ROWS:
            return True
    return False
