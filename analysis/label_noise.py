"""Suspected label errors, told apart from systematic subgroups that look like them.

cleanlab's ``find_label_issues`` on the validation probabilities (out-of-sample for the validation set) lists the
datapoints whose label the model confidently contradicts. A wrong label is one explanation; a group the model gets
consistently wrong (a contradicting shortcut, a style it never learnt) is another, and it needs a fix in the data
or the model, not relabelling. What tells them apart: a mislabelled datapoint looks like the class the model
predicts, so among the datapoints with that prediction its nearest neighbours in a captured feature space pass; a
member of a systematic subgroup sits among other members, and its neighbours fail too.

So each suspect is kept as label noise unless:

- it lies in a reported slice (not one on the label alone: label noise in a class makes the class a slice) or a
  reported subgroup that explains its suspects: they are significantly more frequent there than elsewhere, at least
  half of them in excess of the rate outside (label noise falls on every group alike); in an internal slice, where
  a feature space was captured, its own neighbours must also fail more than its prediction's datapoints do
  (binomial test below, p < 0.05): an internal slice describes what the model does, which mislabelled datapoints
  share with the others it gets wrong, while a mislabelled datapoint still looks like its predicted class;
- or, where a feature space was captured, its 10 nearest neighbours with the same prediction fail significantly
  more than that prediction's datapoints do (one-sided binomial test, p < 0.01): it is one of a neighbourhood of
  failures. Such suspects of one confusion cell (label, prediction), three or more, form a systematic subgroup.

The rest are ranked by how little their neighbourhood fails (the binomial p-value, highest first: least like a
member of a failing group), then by self-confidence (the probability the model gives the stated label, lowest
first), with the neighbourhood-failing ones that form no group last; without a feature space, by self-confidence.
Each carries its confidence over the epochs (the data map) where the run has several.
"""

from __future__ import annotations

import warnings
from typing import Any, Optional

import numpy as np
from cleanlab.filter import find_label_issues
from scipy.stats import binom, hypergeom
from sklearn.neighbors import NearestNeighbors

from analysis.data_map import History
from analysis.findings import LabelIssue, SuspectGroup, Target
from analysis.meta_terms import MetaVocabulary

# cleanlab says so for every small class; the suspects are as many as it finds, which the report shows
warnings.filterwarnings("ignore", message="May not flag all label issues", category=UserWarning)
NEIGHBOURS = 10
COHERENT_P = 0.01
NOT_ALONE_P = 0.05  # a suspect in an explaining group whose neighbours pass stays a label suspect
MIN_GROUP = 3
EXAMPLES = 5


def suspected_label_errors(values: dict[str, np.ndarray], failed: np.ndarray,
                           explaining: list[tuple[str, str, np.ndarray]], space: Optional[np.ndarray],
                           vocabulary: MetaVocabulary, history: Optional[History], top: int
                           ) -> tuple[list[LabelIssue], list[SuspectGroup]]:
    """The label suspects (best first, at most ``top``) and the systematic subgroups among cleanlab's suspects
    (module docstring).

    ``explaining``: (description, kind, bool mask) of the reported slices and subgroups that may explain suspects;
    ``space``: a feature vector per table row (NaN rows: not captured), or None.
    """
    rows = _suspects(values)
    if not len(rows):
        return [], []
    groups: list[SuspectGroup] = []
    remaining = np.ones(len(rows), dtype=bool)
    suspect = np.zeros(len(failed), dtype=bool)
    suspect[rows] = True
    neighbours = _neighbours_failing(rows, values, failed, space)
    for description, kind, mask in explaining:
        inside = remaining & mask[rows] & ((neighbours[1] < NOT_ALONE_P) if kind == "internal slice" else True)
        if inside.sum() >= MIN_GROUP and _explains(mask, suspect):
            groups.append(_group(description, f"{int(inside.sum())} suspects lie in this {kind}", rows[inside],
                                 values, vocabulary))
            remaining &= ~inside
    coherent = remaining & (neighbours[1] < COHERENT_P)
    label, prediction = values["label"], values["prediction"]
    for cell in sorted({(label[r], prediction[r]) for r in rows[coherent]}, key=str):
        members = coherent & (label[rows] == cell[0]) & (prediction[rows] == cell[1])
        if members.sum() >= MIN_GROUP:
            names = (class_name(values, cell[0], "label"), class_name(values, cell[1], "prediction"))
            groups.append(_group(f"label {names[0]}, predicted {names[1]}",
                                 f"{int(members.sum())} suspects whose nearest neighbours with the same prediction "
                                 "fail too", rows[members], values, vocabulary))
            remaining &= ~members
    # least like a neighbourhood of failures first (cleanlab's order among equals), the neighbourhood-failing last
    order = np.lexsort((-neighbours[1][remaining], coherent[remaining]))
    chosen = zip(np.flatnonzero(remaining)[order][:top], rows[remaining][order][:top])
    return [_issue(row, values, history, neighbours[0][k]) for k, row in chosen], groups


def _explains(group: np.ndarray, suspect: np.ndarray) -> bool:
    """Whether a group explains the suspects in it: they are significantly more frequent there than outside
    (one-sided Fisher exact test, p < 0.01), and at least half of them are in excess of the outside rate. Label
    noise falls on any group at the outside rate, so a group with a few suspects among many failures explains
    none of them; nor does a group of most datapoints."""
    inside, size = int((group & suspect).sum()), int(group.sum())
    if 2 * size > len(group):  # most datapoints: not a subgroup
        return False
    outside_rate = int((~group & suspect).sum()) / max(len(group) - size, 1)
    p_value = hypergeom.sf(inside - 1, len(group), int(suspect.sum()), size)
    return bool(p_value < COHERENT_P and inside - outside_rate * size >= inside / 2)


def _suspects(values: dict[str, np.ndarray]) -> np.ndarray:
    """cleanlab's label issues (table rows), most suspicious (lowest self-confidence) first."""
    if "probabilities" not in values or "label" not in values or "prediction" not in values:
        return np.zeros(0, dtype=np.int64)
    probabilities, labels = values["probabilities"], values["label"]
    usable = np.isfinite(probabilities).all(axis=1) & (labels >= 0) & (labels < probabilities.shape[1])
    if usable.sum() < 2 * probabilities.shape[1]:
        return np.zeros(0, dtype=np.int64)
    rows = np.flatnonzero(usable)
    everything = len(rows) == len(labels)  # no copy of a million rows of probabilities when all are usable
    # float32 as stored: cleanlab takes a third of the memory it needs for float64, with the same issues
    ranked = find_label_issues(labels.astype(np.int64) if everything else labels[rows].astype(np.int64),
                               probabilities if everything else probabilities[rows], n_jobs=1,
                               return_indices_ranked_by="self_confidence")
    return rows[np.asarray(ranked, dtype=np.int64)]


def _neighbours_failing(rows: np.ndarray, values: dict[str, np.ndarray], failed: np.ndarray,
                        space: Optional[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """For each suspect row: the share of its nearest same-prediction neighbours that fail (NaN without a space)
    and the one-sided binomial p-value of that many against its prediction's failure rate (1 without a space)."""
    share, p_value = np.full(len(rows), np.nan), np.ones(len(rows))
    if space is None:
        return share, p_value
    prediction = values["prediction"]
    captured = np.isfinite(space).all(axis=1) & np.isfinite(prediction)
    for predicted in np.unique(prediction[rows][captured[rows]]):
        peers = np.flatnonzero(captured & (prediction == predicted))
        asked = np.flatnonzero(captured[rows] & (prediction[rows] == predicted))
        if len(peers) <= NEIGHBOURS + 1:
            continue
        found = NearestNeighbors(n_neighbors=NEIGHBOURS + 1).fit(space[peers]).kneighbors(space[rows[asked]])[1]
        for k, near in zip(asked, found):
            near = peers[near][peers[near] != rows[k]][:NEIGHBOURS]
            others = failed[peers].sum() - failed[rows[k]]
            rate = others / max(len(peers) - 1, 1)
            failing = int(failed[near].sum())
            share[k], p_value[k] = failing / len(near), float(binom.sf(failing - 1, len(near), rate))
    return share, p_value


def _group(description: str, why: str, rows: np.ndarray, values: dict[str, np.ndarray],
           vocabulary: MetaVocabulary) -> SuspectGroup:
    """The suspects ``rows`` as a systematic group, described in meta terms; its examples are its most confidently
    contradicted suspects (``rows`` are in cleanlab's order)."""
    mask = np.zeros(len(values["idx"]), dtype=bool)
    mask[rows] = True
    match = vocabulary.best_match(mask)
    return SuspectGroup(description, why, len(rows), np.sort(values["idx"][rows]), match,
                        values["idx"][rows[:EXAMPLES]].tolist(), Target(conditions=list(match.conditions) if match
                                                                       else []))


def _issue(row: int, values: dict[str, np.ndarray], history: Optional[History], neighbours: float) -> LabelIssue:
    label, probabilities = int(values["label"][row]), values["probabilities"][row]
    confidence = None if history is None or not np.isfinite(history.confidence[row]) \
        else float(history.confidence[row])
    return LabelIssue(int(values["idx"][row]), class_name(values, label, "label"),
                      class_name(values, int(np.argmax(probabilities)), "prediction"),
                      float(probabilities[label]), confidence, None if np.isnan(neighbours) else float(neighbours))


def class_name(values: dict[str, np.ndarray], class_id: Any, hint: str = "label") -> Any:
    """The class's name where the table names classes, else its number."""
    for ids, names in ((hint, f"{hint}_name"), ("label", "label_name"), ("prediction", "prediction_name")):
        if names in values:
            match = np.flatnonzero(values[ids] == class_id)
            if len(match):
                return values[names][match[0]]
    return int(class_id)
