"""Suspected label errors, told apart from systematic groups that look like them, and withheld when the model
cannot support them.

cleanlab's ``find_label_issues`` on the validation probabilities (out-of-sample for the validation set) lists the
datapoints whose label the model confidently contradicts. A wrong label is one explanation; a group the model gets
consistently wrong (a training-label rule, a contradicting shortcut, a style it never learnt) is another, and it
needs a fix in the training data or the model, not relabelling. What tells them apart, in a captured feature space:
a mislabelled datapoint looks like the class the model predicts, so its nearest neighbours carry that class's label
and pass; a member of a group sits among other members, which share its label and fail alike.

So a suspect leaves the list when:

- it is in a group that fails alike (``analysis/failure_groups.py``: a systematic group or a rare variant), which
  is reported as a group;
- it lies in a reported slice (not one on the label alone: label noise in a class makes the class a slice) or a
  reported subgroup that explains its suspects: they are significantly more frequent there than elsewhere, at least
  half of them in excess of the rate outside (label noise falls on every group alike); in an internal slice, where
  a feature space was captured, it must also be in a neighbourhood of failures (its neighbours fail significantly
  more than the space's rate): an internal slice describes what the model does, which mislabelled datapoints share
  with the others it gets wrong, while a mislabelled datapoint still looks like its predicted class. These form
  the *suspect groups*;
- where a feature space was captured, fewer than half of its ``NEIGHBOURS`` nearest neighbours carry the label the
  model suggests: only the model disagrees with the label, the data around it does not (a hard or unusual
  datapoint, a low-margin mistake). How many are left out so is said (``label_issues_note``).

The rest are ranked by the model's margin (the probability of the suggested class minus the label's) times the
share of neighbours that carry the suggested label (the margin alone without a space): a confident disagreement
the data backs first, and a low-margin mistake of the model (the model itself unsure) below every confident one.

No suspect is listed when the model's probabilities cannot support any: a model near chance (accuracy within
``NEAR_CHANCE`` of the way from chance, always predicting the most common label, to perfect), or one that has not
learnt most of its data: most datapoints hard to learn on the data map, their label's mean probability over the
epochs as near chance. (Hard to learn in the data map's own terms, below 0.5, would be every datapoint of an
under-confident model that is right on 86% of them, and every mislabelled one: no reason to withhold.) The note
says why.
"""

from __future__ import annotations

import warnings
from typing import Optional

import numpy as np
from cleanlab.filter import find_label_issues
from scipy.stats import hypergeom

from analysis.class_names import class_name
from analysis.data_map import History
from analysis.failure_groups import NEIGHBOURS, Neighbourhoods, coherent_failures
from analysis.findings import LabelIssue, SuspectGroup, Target
from analysis.meta_terms import MetaVocabulary

# cleanlab says so for every small class; the suspects are as many as it finds, which the report shows
warnings.filterwarnings("ignore", message="May not flag all label issues", category=UserWarning)
EXPLAINS_P = 0.01
MIN_GROUP = 3
BACKED = 0.5  # the share of a suspect's neighbours that must carry the suggested label
CROWDED = 2
REACH = 3 * NEIGHBOURS  # a suspect this near a group of its label that fails alike is taken for one of its members
NEAR_CHANCE = 0.1
EXAMPLES = 5


def suspected_label_errors(values: dict[str, np.ndarray], failed: np.ndarray,
                           explaining: list[tuple[str, str, np.ndarray]], near: Optional[Neighbourhoods],
                           vocabulary: MetaVocabulary, history: Optional[History], top: int,
                           grouped: Optional[np.ndarray] = None
                           ) -> tuple[list[LabelIssue], list[SuspectGroup], Optional[str]]:
    """The label suspects (best first, at most ``top``), the suspect groups, and what the list leaves out and why
    (module docstring).

    ``explaining``: (description, kind, bool mask) of the reported slices and subgroups that may explain suspects;
    ``near``: the neighbourhoods of a captured feature space, or None; ``grouped``: the rows of the groups that
    fail alike, which leave the suspects.
    """
    withheld = _withheld(values, history)
    if withheld is not None:
        return [], [], withheld
    rows = _suspects(values)
    if not len(rows):
        return [], [], None
    groups: list[SuspectGroup] = []
    remaining = np.ones(len(rows), dtype=bool) if grouped is None else ~grouped[rows]
    suspect = np.zeros(len(failed), dtype=bool)
    suspect[rows] = True
    among_failures = coherent_failures(near, failed)[rows] if near is not None else np.ones(len(rows), dtype=bool)
    for description, kind, mask in explaining:
        inside = remaining & mask[rows] & (among_failures if kind == "internal slice" else True)
        if inside.sum() >= MIN_GROUP and (_explains(mask, suspect) or _fails_twice(mask, failed)):
            groups.append(_group(description, f"{int(inside.sum())} suspects lie in this {kind}", rows[inside],
                                 values, vocabulary))
            remaining &= ~inside
    margin, backing, failing, reached = _evidence(rows, values, failed, near, grouped)
    edge = remaining & (reached | _crowded(rows, values, failed, grouped))
    unbacked = remaining & ~edge & (backing < BACKED)
    remaining &= ~edge & ~unbacked
    score = margin * np.nan_to_num(backing, nan=1.0)
    order = np.flatnonzero(remaining)[np.argsort(-score[remaining], kind="stable")][:top]
    issues = [_issue(rows[k], values, history, failing[k], margin[k], backing[k]) for k in order]
    return issues, groups, _left_out(int(edge.sum()), int(unbacked.sum()))


def _left_out(edge: int, unbacked: int) -> Optional[str]:
    """What the list leaves out of cleanlab's suspects, and why (None: nothing)."""
    reasons = [f"{edge} beside or in the confusion cell of a group of their label that fails alike (most likely its "
               "members)"] if edge else []
    reasons += [f"{unbacked} whose nearest neighbours mostly do not carry the label the model suggests (only the "
                "model disagrees: a hard or unusual datapoint, or a mistake of the model)"] if unbacked else []
    return f"left out of cleanlab's suspects: {'; '.join(reasons)}" if reasons else None


def _withheld(values: dict[str, np.ndarray], history: Optional[History]) -> Optional[str]:
    """Why the model's probabilities cannot support label suspects, or None: a model near chance, or one that has
    not learnt most of its data (most datapoints' mean probability of their label over the epochs near chance)."""
    if "label" not in values or "prediction" not in values or not len(values["label"]):
        return None
    labels = values["label"]
    classes = values["probabilities"].shape[1] if "probabilities" in values else len(np.unique(labels))
    chance = max(float(np.unique(labels, return_counts=True)[1].max() / len(labels)), 1 / max(classes, 1))
    near_chance = chance + NEAR_CHANCE * (1 - chance)
    accuracy = float(np.mean(labels == values["prediction"]))
    if accuracy < near_chance:
        return (f"no label suspects: the model is near chance (accuracy {accuracy:.1%}, against {chance:.1%} for "
                "always predicting the most common label), so its disagreements with the labels say nothing about "
                "them; train it further first")
    known = np.isfinite(history.confidence) if history is not None else np.zeros(0, dtype=bool)
    unlearnt = int((history.confidence[known] < near_chance).sum()) if history is not None else 0
    if 2 * unlearnt > known.sum():
        return (f"no label suspects: most datapoints are hard to learn on the data map ({unlearnt} of "
                f"{int(known.sum())} have a mean probability of their label over the epochs {history.epochs} below "
                f"{near_chance:.2f}, near the {chance:.2f} of chance): the model has not learnt the data, so its "
                "disagreements with the labels say nothing about them")
    return None


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
    return bool(p_value < EXPLAINS_P and inside - outside_rate * size >= inside / 2)


def _fails_twice(group: np.ndarray, failed: np.ndarray) -> bool:
    """Whether a (reported, so significant) group fails at least twice as often as the rest: then most of its
    failures are its cause's, and a suspect in it is more likely one of them than a mislabelled datapoint."""
    size = int(group.sum())
    if 2 * size > len(group):  # most datapoints: not a subgroup
        return False
    return bool(failed[group].mean() >= 2 * failed[~group].mean())


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


def _evidence(rows: np.ndarray, values: dict[str, np.ndarray], failed: np.ndarray, near: Optional[Neighbourhoods],
              grouped: Optional[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For each suspect row: the model's margin (p(suggested) - p(label)); the share of its nearest neighbours that
    carry the suggested label and the share that fail (NaN without a space or a vector); whether a datapoint of a
    group that fails alike, with its label, is among its ``REACH`` nearest neighbours."""
    probabilities = values["probabilities"][rows].astype(np.float64)
    label = values["label"]
    margin = probabilities.max(axis=1) - probabilities[np.arange(len(rows)), label[rows].astype(np.int64)]
    backing, failing = np.full(len(rows), np.nan), np.full(len(rows), np.nan)
    reached = np.zeros(len(rows), dtype=bool)
    if near is None:
        return margin, backing, failing, reached
    captured = near.captured(rows)
    neighbours = near.of(rows[captured], REACH)
    closest = neighbours[:, :NEIGHBOURS]
    backing[captured] = (label[closest] == np.argmax(probabilities[captured], axis=1)[:, None]).mean(axis=1)
    failing[captured] = failed[closest].mean(axis=1)
    if grouped is not None:
        reached[captured] = (grouped[neighbours] & (label[neighbours] == label[rows[captured]][:, None])).any(axis=1)
    return margin, backing, failing, reached


def _crowded(rows: np.ndarray, values: dict[str, np.ndarray], failed: np.ndarray, grouped: Optional[np.ndarray]
             ) -> np.ndarray:
    """Whether each suspect row is in a confusion cell (label, prediction) where a group that fails alike has
    failures and which holds more than ``CROWDED`` times the failures of the median cell no group touches (label
    noise alone): most failures there are that group's, its edge included."""
    crowded = np.zeros(len(rows), dtype=bool)
    if grouped is None or not grouped.any():
        return crowded
    predicted = failed & np.isfinite(values["prediction"])
    label, prediction = values["label"][predicted].astype(np.int64), values["prediction"][predicted].astype(np.int64)
    classes = int(max(label.max(), prediction.max())) + 1
    counts = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(counts, (label, prediction), 1)
    touched = np.zeros((classes, classes), dtype=bool)
    touched[label[grouped[predicted]], prediction[grouped[predicted]]] = True
    quiet = ~touched & ~np.eye(classes, dtype=bool)
    noise = max(float(np.median(counts[quiet])) if quiet.any() else 0.0, 1.0)
    cell = predicted[rows]
    where = (values["label"][rows[cell]].astype(np.int64), values["prediction"][rows[cell]].astype(np.int64))
    crowded[cell] = touched[where] & (counts[where] > CROWDED * noise)
    return crowded


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


def _issue(row: int, values: dict[str, np.ndarray], history: Optional[History], failing: float, margin: float,
           backing: float) -> LabelIssue:
    label, probabilities = int(values["label"][row]), values["probabilities"][row]
    confidence = None if history is None or not np.isfinite(history.confidence[row]) \
        else float(history.confidence[row])
    return LabelIssue(int(values["idx"][row]), class_name(values, label, "label"),
                      class_name(values, int(np.argmax(probabilities)), "prediction"), float(probabilities[label]),
                      confidence, _optional(failing), float(margin), _optional(backing))


def _optional(value: float) -> Optional[float]:
    return None if np.isnan(value) else float(value)

