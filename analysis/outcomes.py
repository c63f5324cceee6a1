"""Columns that restate the failure: quantities computed from the model's output, found by measure.

A target score, a logit, a confidence, a margin or a predicted class is low (or wrong) *because* the model fails:
as a slice condition or a separating quantity it says nothing about why. A debugger declares such summary keys
(``BaseDebugger.summary_roles``, role ``outcome``); this module catches the undeclared ones, in any column, meta
info included.

The measure: a column restates the outcome when the model's output predicts it, beyond what knowing the label and
whether the datapoint failed already tells. Within each group of datapoints with the same label and the same
outcome (failed or passed), the column is predicted from output features (the logits of the label, of the best and
second-best classes, their probabilities, the margin, the entropy and the log partition function), by least squares
and by the mean of the 10 nearest neighbours in that feature space (leave-one-out), on a sample of rows:

- a number restates when the better of the two leaves at most 10% of its variance (R^2 >= 0.9) and at most 20% of
  what the groups' means leave;
- a category (a string, a flag, a whole number with few values) when the neighbours' majority, or the predicted
  class (the column's most common value for each), gives it on at least 95% of rows and fixes at least 80% of the
  errors of each group's most common value.

A real cause does not pass: ``occluded`` or a contradicting marker makes the model fail, but among the failures
(or among the passes) of one class, the output does not tell which datapoints carry it. The prediction itself, a
copy of it, or a debugger's target score, does pass.

A measure cannot tell which way the dependence runs: a unit that drives the output (a channel that fires on an
artifact and flips the prediction) is as predictable from the output as a quantity computed from it. So the
summaries of a debugger that hooks a layer (the table's ``layers`` role) are never measured: a layer's
activations come before the output; such a debugger declares its outcome keys (Grad-CAM does). Meta info and the
summaries of debuggers that hook no layer are measured.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from sklearn.neighbors import NearestNeighbors

from analysis.findings import Restatement

SAMPLE_ROWS = 4000
NEIGHBOURS = 10
MIN_R2, MIN_BEYOND_GROUPS = 0.9, 0.8  # numbers
MIN_ACCURACY, MIN_ERRORS_FIXED = 0.95, 0.8  # categories
FEW_VALUES = 12
MIN_FINITE = 0.9  # a column with more missing values in the sample is not judged


def output_features(probabilities: np.ndarray, label: Optional[np.ndarray],
                    logsumexp: Optional[np.ndarray]) -> np.ndarray:
    """Per-row features of the model's output that do not depend on the order of the classes: the label's, the best
    and the second-best class's log probability (logit, with the log partition function), probabilities, margin,
    entropy."""
    p = np.clip(probabilities.astype(np.float64), 1e-12, 1.0)
    logp = np.log(p)
    order = np.sort(logp, axis=1)
    best, second = order[:, -1], order[:, -2] if p.shape[1] > 1 else order[:, -1]
    rows = np.arange(len(p))
    own = logp[rows, label.astype(np.int64)] if label is not None else best
    shift = logsumexp.astype(np.float64) if logsumexp is not None else np.zeros(len(p))
    shift = np.where(np.isfinite(shift), shift, 0.0)
    entropy = -(p * logp).sum(axis=1)
    features = [own, best, second, np.exp(own), np.exp(best), np.exp(best) - np.exp(second), entropy, shift,
                own + shift, best + shift, second + shift]
    return np.column_stack(features)


def measured_restatements(columns: dict[str, np.ndarray], probabilities: np.ndarray, label: Optional[np.ndarray],
                          logsumexp: Optional[np.ndarray], failed: np.ndarray, seed: int = 0) -> list[Restatement]:
    """The columns of ``columns`` that the model's output predicts (module docstring), with the evidence; measured
    on a sample of SAMPLE_ROWS rows with finite probabilities."""
    usable = np.flatnonzero(np.isfinite(probabilities).all(axis=1))
    if len(usable) > SAMPLE_ROWS:
        usable = np.sort(np.random.default_rng(seed).choice(usable, SAMPLE_ROWS, replace=False))
    if label is not None:
        usable = usable[(label[usable] >= 0) & (label[usable] < probabilities.shape[1])]
    groups = _groups(usable, label, failed)
    if not groups:
        return []
    space = output_features(probabilities[usable], None if label is None else label[usable],
                            None if logsumexp is None else logsumexp[usable])
    space = (space - space.mean(axis=0)) / np.maximum(space.std(axis=0), 1e-12)
    position = {row: k for k, row in enumerate(usable)}
    predicted = np.argmax(probabilities[usable], axis=1)
    fitted = [_Group(np.array([position[r] for r in rows]), space, predicted) for rows in groups]
    found = []
    for name, values in columns.items():
        why = _restates(values[usable], fitted)
        if why is not None:
            found.append(Restatement(name, why))
    return found


def _groups(rows: np.ndarray, label: Optional[np.ndarray], failed: np.ndarray) -> list[np.ndarray]:
    """The sample's rows by (label, failed), each large enough for the neighbours and the least squares fit."""
    keys = failed[rows].astype(np.int64) if label is None else label[rows].astype(np.int64) * 2 + failed[rows]
    groups = [rows[keys == key] for key in np.unique(keys)]
    return [group for group in groups if len(group) > 3 * NEIGHBOURS]


class _Group:
    """One (label, outcome) group of the sample: its rows' neighbours, an orthonormal basis of its features and its
    rows' predicted classes."""

    def __init__(self, positions: np.ndarray, space: np.ndarray, predicted: np.ndarray) -> None:
        self.positions, self.predicted = positions, predicted[positions]
        points = space[positions]
        neighbours = NearestNeighbors(n_neighbors=NEIGHBOURS + 1).fit(points).kneighbors(points)[1]
        self.neighbours = neighbours[:, 1:]  # leave one out: a row is not its own neighbour
        design = np.column_stack([np.ones(len(points)), points])
        self.basis = np.linalg.qr(design)[0]


def _restates(values: np.ndarray, groups: list[_Group]) -> Optional[str]:
    if values.dtype == object or values.dtype.kind == "b":
        return _category_restates(values, groups)
    numbers = values.astype(np.float64)
    finite = np.isfinite(numbers)
    if finite.mean() < MIN_FINITE:
        return None
    if len(np.unique(numbers[finite])) <= FEW_VALUES:
        return _category_restates(values, groups)
    return _number_restates(np.where(finite, numbers, np.nan), groups)


def _number_restates(numbers: np.ndarray, groups: list[_Group]) -> Optional[str]:
    total = numbers[np.concatenate([g.positions for g in groups])]
    total = total[np.isfinite(total)]
    spread = float(((total - total.mean()) ** 2).sum()) if len(total) else 0.0
    if spread <= 0:
        return None
    within = least_squares = neighbours = 0.0
    for group in groups:
        x = numbers[group.positions]
        finite = np.isfinite(x)
        if finite.sum() < 3:
            continue
        mean = x[finite].mean()
        within += float(((x[finite] - mean) ** 2).sum())
        filled = np.where(finite, x, mean)
        residual = filled - group.basis @ (group.basis.T @ filled)
        least_squares += float((residual[finite] ** 2).sum())
        with np.errstate(invalid="ignore"):
            guess = np.nanmean(x[group.neighbours], axis=1)
        guess = np.where(np.isfinite(guess), guess, mean)
        neighbours += float(((x[finite] - guess[finite]) ** 2).sum())
    left = min(least_squares, neighbours)
    r2 = 1 - left / spread
    if within <= 0 or r2 < MIN_R2 or 1 - left / within < MIN_BEYOND_GROUPS:
        return None
    return (f"the model's output predicts it (R^2 {r2:.2f}; {1 - left / within:.0%} of what each label's failures and "
            "passes leave)")


def _category_restates(values: np.ndarray, groups: list[_Group]) -> Optional[str]:
    right = majority = rows = 0
    for group in groups:
        x = values[group.positions]
        codes = np.unique(x.astype(str), return_inverse=True)[1]
        counts = np.bincount(codes)
        votes = np.zeros((len(x), len(counts)), dtype=np.int64)
        np.add.at(votes, (np.repeat(np.arange(len(x)), NEIGHBOURS), codes[group.neighbours].ravel()), 1)
        by_class = np.zeros((group.predicted.max() + 1, len(counts)), dtype=np.int64)
        np.add.at(by_class, (group.predicted, codes), 1)  # the column's values for each predicted class
        right += max(int((votes.argmax(axis=1) == codes).sum()), int(by_class.max(axis=1).sum()))
        majority += int(counts.max())
        rows += len(x)
    if rows == 0 or majority == rows:
        return None
    accuracy, base = right / rows, majority / rows
    fixed = (accuracy - base) / (1 - base)
    if accuracy < MIN_ACCURACY or fixed < MIN_ERRORS_FIXED:
        return None
    return (f"the model's output predicts it ({accuracy:.0%} of datapoints; {fixed:.0%} of the errors of each label's "
            "most common value among its failures and passes)")
