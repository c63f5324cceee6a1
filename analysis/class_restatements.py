"""Findings that mostly restate the class: their datapoints are mostly one label, and that label alone explains how
often they fail.

When one class fails far more than the others, anything that tells that class apart separates failures too: the
centre of mass of a 9, a unit that fires on 9s, a cluster of 9s. Such a finding is true and says nothing beyond
"9s fail". So a finding (a slice that is not on the label alone, a separating quantity by its failure side: as many
datapoints as fail, at its most failure-like values; a subgroup) gets a ``class_note`` when at least MOSTLY of its
datapoints have one label and, within that label, its datapoints fail no more than the label's others (one-sided
Fisher exact test at ALPHA: a finding that does fail more within its class is a finding about that class, not a
restatement), or it holds all of them: "mostly label_name = 9 (52 of 60); 9s fail as often outside it (77 %
against 75 %): it restates the class".
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from analysis.explain import rows_of
from analysis.findings import Findings
from analysis.label_noise import class_name
from analysis.separators import failing_side
from analysis.slices import ALPHA, fails_more

MOSTLY = 0.5


def note_class_restatements(findings: Findings, values: dict[str, np.ndarray], failed: np.ndarray,
                            label_columns: frozenset[str]) -> None:
    """Set ``class_note`` on every finding that mostly restates its class (module docstring)."""
    if "label" not in values:
        return
    idx, share = values["idx"], float(failed.mean())
    for found in [*findings.meta.slices, *findings.internals.slices]:
        if not all(c.column in label_columns for c in found.conditions):
            found.class_note = class_note(rows_of(idx, found.idx), values, failed)
    for separator in [*findings.meta.separators, *findings.internals.separators]:
        column = separator.units[0].column if separator.units else separator.column
        separator.class_note = class_note(failing_side(values[column], separator.direction, share), values, failed)
    for group in findings.subgroups:
        group.class_note = class_note(rows_of(idx, group.idx), values, failed)


def class_note(rows: np.ndarray, values: dict[str, np.ndarray], failed: np.ndarray) -> Optional[str]:
    """Why the datapoints of ``rows`` (a bool mask) restate their class, or None when they do not."""
    labels = values["label"][rows]
    if not len(labels):
        return None
    classes, counts = np.unique(labels, return_counts=True)
    top = int(np.argmax(counts))
    if counts[top] < MOSTLY * len(labels):
        return None
    of_class = values["label"] == classes[top]
    inside, outside = of_class & rows, of_class & ~rows
    if outside.any() and fails_more(int(failed[inside].sum()), int(inside.sum()), int(failed[outside].sum()),
                                    int(outside.sum()), ALPHA):
        return None
    name = class_name(values, classes[top])
    where = "label_name" if "label_name" in values else "label"
    head = f"mostly {where} = {name} ({counts[top]} of {len(labels)})"
    if not outside.any():
        return f"{head}: every {name} is in it, so it restates the class"
    return (f"{head}; the other datapoints labelled {name} fail as often ({failed[outside].mean():.0%} against "
            f"{failed[inside].mean():.0%} in it): it restates the class")
