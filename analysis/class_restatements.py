"""Findings that mostly restate the class: what they tell apart is which class a datapoint is, and the class alone
explains how often they fail.

When one class fails far more than the others, anything that tells that class apart separates failures too: the
centre of mass of a 9, a unit that fires on 9s, a cluster of 9s. Such a finding is true and says nothing beyond
"9s fail". So a finding gets a ``class_note``:

- a slice that is not on the label alone, or a subgroup: when at least MOSTLY of its datapoints have one label and,
  within each of its classes, its datapoints fail no more than the class's others (a one-sided Cochran-Mantel-
  Haenszel test over its classes at ALPHA: its failures against those its classes' rates predict, by the summed
  hypergeometric variances): "mostly label_name = 3 (54 of 94); within each of its classes it fails no more than
  the rest of the class (35 failures, 43 at its classes' rates): it restates the class". One that does fail more
  within its classes is a finding about them, not a restatement;
- a separating quantity: when within the classes it does not separate failures from passes (a stratified
  Mann-Whitney test: the sum over classes of each class's U statistic against its mean, by its variance with ties
  corrected, two-sided, p >= ALPHA; classes that all fail or all pass carry nothing; on a sample of SEARCH_ROWS
  rows above that): "within a class it tells failures no better than
  chance (AUROC 0.52 within classes, p = 0.41): it restates which classes fail", with the label its failure side
  mostly holds, where one does.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from scipy.stats import norm, rankdata

from analysis.explain import rows_of
from analysis.findings import Findings, on_the_label_alone
from analysis.label_noise import class_name
from analysis.separators import failing_side
from analysis.slices import ALPHA, SEARCH_ROWS

MOSTLY = 0.5


def note_class_restatements(findings: Findings, values: dict[str, np.ndarray], failed: np.ndarray,
                            label_columns: frozenset[str]) -> None:
    """Set ``class_note`` on every finding that mostly restates its class (module docstring)."""
    if "label" not in values:
        return
    idx, share = values["idx"], float(failed.mean())
    for found in [*findings.meta.slices, *findings.inputs.slices, *findings.internals.slices]:
        if not on_the_label_alone(found.conditions, label_columns):
            found.class_note = class_note(rows_of(idx, found.idx), values, failed)
    for separator in [*findings.meta.separators, *findings.inputs.separators, *findings.internals.separators]:
        column = values[separator.units[0].column if separator.units else separator.column]
        separator.class_note = separator_note(column, separator.direction, values, failed, share)
    for group in findings.subgroups:
        group.class_note = class_note(rows_of(idx, group.idx), values, failed)


def class_note(rows: np.ndarray, values: dict[str, np.ndarray], failed: np.ndarray) -> Optional[str]:
    """Why the datapoints of ``rows`` (a bool mask) restate their class, or None when they do not."""
    dominant = _dominant_class(rows, values)
    if dominant is None:
        return None
    labels = values["label"]
    observed = expected = variance = 0.0
    for class_id in np.unique(labels[rows]):
        of_class = labels == class_id
        size, members, failures = int(of_class.sum()), int((of_class & rows).sum()), int(failed[of_class].sum())
        observed += int(failed[of_class & rows].sum())
        expected += members * failures / size
        if size > 1:
            variance += members * (size - members) * failures * (size - failures) / (size * size * (size - 1))
    if variance > 0 and norm.sf((observed - expected) / np.sqrt(variance)) < ALPHA:
        return None
    head = f"mostly {_label_column(values)} = {class_name(values, dominant[0])} ({dominant[1]} of {int(rows.sum())})"
    return (f"{head}; within each of its classes it fails no more than the rest of the class ({observed:.0f} "
            f"failures, {expected:.0f} at its classes' rates): it restates the class")


def separator_note(column: np.ndarray, direction: str, values: dict[str, np.ndarray], failed: np.ndarray,
                   share: float, seed: int = 0) -> Optional[str]:
    """Why a separating quantity restates which classes fail, or None when it separates failures within them (on
    the separating quantities' sample of rows above SEARCH_ROWS)."""
    sample = np.arange(len(failed)) if len(failed) <= SEARCH_ROWS else \
        np.sort(np.random.default_rng(seed).choice(len(failed), SEARCH_ROWS, replace=False))
    numbers, labels, failing = column[sample].astype(np.float64), values["label"][sample], failed[sample]
    usable = np.isfinite(numbers)
    statistic = expected = variance = pairs = 0.0
    for class_id in np.unique(labels[usable]):
        rows = usable & (labels == class_id)
        u, mean, spread = _u_statistic(numbers[rows], failing[rows])
        statistic, expected, variance = statistic + u, expected + mean, variance + spread
        pairs += 2 * mean
    if variance > 0:
        p_value = float(2 * norm.sf(abs(statistic - expected) / np.sqrt(variance)))
        if p_value < ALPHA:
            return None
        auc = statistic / pairs
        note = (f"within a class it tells failures no better than chance (AUROC {max(auc, 1 - auc):.2f} within "
                f"classes, p = {p_value:.2g}): it restates which classes fail")
    else:
        note = "every class fails all or none of its datapoints: it restates which classes fail"
    side = failing_side(column, direction, share)
    dominant = _dominant_class(side, values)
    if dominant is not None:
        note += (f" (its failure side is mostly {_label_column(values)} = {class_name(values, dominant[0])}, "
                 f"{dominant[1]} of {int(side.sum())})")
    return note


def _u_statistic(numbers: np.ndarray, failing: np.ndarray) -> tuple[float, float, float]:
    """Mann-Whitney's U of the failing values against the passing ones, its mean and its variance (ties
    corrected) under no difference; zeros where either group is empty."""
    m, n = int(failing.sum()), int((~failing).sum())
    if not m or not n:
        return 0.0, 0.0, 0.0
    ranks = rankdata(numbers)
    ties = np.unique(numbers, return_counts=True)[1].astype(np.float64)
    total = m + n
    variance = m * n / 12 * ((total + 1) - float((ties ** 3 - ties).sum()) / (total * (total - 1)))
    return float(ranks[failing].sum()) - m * (m + 1) / 2, m * n / 2, variance


def _dominant_class(rows: np.ndarray, values: dict[str, np.ndarray]) -> Optional[tuple[int, int]]:
    """(label, count) of the label at least MOSTLY of the rows have, or None."""
    labels = values["label"][rows]
    if not len(labels):
        return None
    classes, counts = np.unique(labels, return_counts=True)
    top = int(np.argmax(counts))
    return (classes[top], int(counts[top])) if counts[top] >= MOSTLY * len(labels) else None


def _label_column(values: dict[str, np.ndarray]) -> str:
    return "label_name" if "label_name" in values else "label"
