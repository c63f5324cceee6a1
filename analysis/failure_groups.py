"""Groups that fail alike: failing datapoints that sit together in a captured feature space with neighbours of
their own label that fail too. Neither kind is label noise, and each is reported as one group, never as a list of
label suspects.

A mislabelled validation datapoint looks like the class the model predicts: its nearest neighbours in the model's
feature space carry another label (its true class's) and pass. A member of a group the model gets wrong
consistently sits among other members: they share its label (the validation labels agree with their neighbours)
and fail alike. Two kinds of such groups:

- **systematic**: predicted consistently as one other class (at least ``CONSISTENT`` of its failures). The model
  learnt that class for datapoints like these: most often their *training* labels name it (an annotation rule, a
  mapping error), else something they share marks that class for the model (a shortcut). Unless its meta
  description holds a condition, not on the label, under which the other labels fail significantly more too: that
  condition makes every label look like another class (a faulty sensor, a fading signal), which its meta slice
  reports; such a group is left out (its datapoints still are no label suspects);
- **variant**: failures spread over several predictions: a kind of input the model has not learnt (a rare style,
  an artifact), a subgroup to collect more of.

A rare variant of *every* class is looked for again among what no finding explains (``residual_variants``): keywords
spelled another way look to the model like a transcript that lost its keywords, so in the whole space such failures
sit among a noisy channel's, of every label, and no group of one label holds them. With the rows of the reported
slices and groups set aside, they stand out: failures of any label that sit together and fail alike, predicted as
several classes.

How they are found, in the captured feature space the label suspects use (``analysis/failures.py``): every
failing datapoint whose ``NEIGHBOURS`` nearest neighbours fail significantly more than the space's failure rate
(one-sided binomial test, p < ``COHERENT_P``) is *coherent*; coherent failures are linked to the coherent failures
of the same label among their nearest neighbours, and each connected set of links is a group's core. The same label
keeps a group from spreading through a dense region of failures of other classes (a shortcut's victims beside a
mislabelled rule), and at least ``AGREE`` of its core's neighbours must carry its label: the validation labels
agree with their neighbours (a core of one label amid failures of every label, keywords lost to a noisy channel, is
no group of that label). A group's datapoints are its core and every datapoint of that label whose neighbours are
mostly in the core (so its failure rate counts the passing datapoints among them); it is reported when it fails
significantly more than the rest of the space, as a subgroup must (Fisher exact test, Bonferroni over the groups
tried, and a Clopper-Pearson lower bound at least ``FAR_MORE`` times the rest's rate: ``analysis/subgroups.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.stats import beta, binom, hypergeom
from sklearn.neighbors import NearestNeighbors

from analysis.class_names import class_name
from analysis.findings import Subgroup, Target, TrainingLabelGroup, on_the_label_alone
from analysis.meta_terms import MetaVocabulary
from analysis.slices import ALPHA
from analysis.subgroups import FAR_MORE

NEIGHBOURS = 10
MAX_ROWS = 20_000
MIN_CORE = 5  # the fewest coherent failures a group's core may hold, however few rows are indexed
COHERENT_P = 0.05
CONSISTENT = 2 / 3  # a systematic group's failures predicted as one class, at least
SHIFTED_P = 0.01
AGREE = 0.5  # the share of a group's core's neighbours that carry its label, at least
EXAMPLES = 5
SHUFFLES = 19  # of the failures among the rows left, for the largest core chance gives (residual_variants)


@dataclass
class Neighbourhoods:
    """The nearest neighbours of the datapoints of one captured feature space.

    Above ``MAX_ROWS`` captured rows, a random ``MAX_ROWS`` of them are indexed (the groups are found among them);
    ``of`` finds any captured row's neighbours among the indexed ones."""

    space: str
    vectors: np.ndarray  # one per table row; NaN rows: not captured
    captured_rows: np.ndarray  # the table rows with a vector
    rows: np.ndarray  # the indexed table rows, sorted
    index: NearestNeighbors
    neighbours: np.ndarray  # (len(rows), NEIGHBOURS): each indexed row's nearest other indexed rows, as positions

    def captured(self, rows: np.ndarray) -> np.ndarray:
        """Whether each of ``rows`` (table rows) has a vector."""
        return np.isfinite(self.vectors[rows]).all(axis=1)

    def of(self, rows: np.ndarray, count: int = NEIGHBOURS) -> np.ndarray:
        """The ``count`` nearest indexed rows of each of ``rows`` (captured table rows), the row itself left out, as
        table rows."""
        return self.rows[self._positions(self.vectors[rows], rows, count)]

    def _positions(self, vectors: np.ndarray, rows: np.ndarray, count: int) -> np.ndarray:
        found = self.index.kneighbors(vectors, n_neighbors=count + 1)[1]
        itself = self.rows[found] == rows[:, None]  # first, but a duplicate vector may come before it
        drop = np.where(itself.any(axis=1), itself.argmax(axis=1), count)  # not indexed: drop the furthest
        keep = np.ones(found.shape, dtype=bool)
        keep[np.arange(len(rows)), drop] = False
        return found[keep].reshape(len(rows), count)


def neighbourhoods(space: str, vectors: np.ndarray, seed: int = 0) -> Optional[Neighbourhoods]:
    """The neighbourhoods of the captured rows of ``vectors`` (one per table row, NaN: not captured); None when too
    few rows are captured."""
    captured = rows = np.flatnonzero(np.isfinite(vectors).all(axis=1))
    if len(rows) <= 2 * NEIGHBOURS:
        return None
    if len(rows) > MAX_ROWS:
        rows = np.sort(np.random.default_rng(seed).choice(rows, MAX_ROWS, replace=False))
    near = Neighbourhoods(space, vectors, captured, rows, NearestNeighbors().fit(vectors[rows]),
                          np.zeros(0, dtype=np.int64))
    near.neighbours = near._positions(vectors[rows], rows, NEIGHBOURS)
    return near


def coherent_failures(near: Neighbourhoods, failed: np.ndarray) -> np.ndarray:
    """The failing indexed rows whose neighbours fail significantly more than the indexed rows' failure rate, as a
    mask over the table."""
    fails = failed[near.rows]
    failing = fails[near.neighbours].sum(axis=1)
    coherent = np.zeros(len(failed), dtype=bool)
    coherent[near.rows] = fails & (binom.sf(failing - 1, NEIGHBOURS, fails.mean()) < COHERENT_P)
    return coherent


def failure_groups(near: Neighbourhoods, values: dict[str, np.ndarray], failed: np.ndarray,
                   vocabulary: MetaVocabulary, min_size: int, layer: Optional[str], label_columns: frozenset[str]
                   ) -> tuple[list[TrainingLabelGroup], list[Subgroup], np.ndarray]:
    """The systematic groups (most failures first), the variants (highest failure rate first) and the rows of the
    groups a meta condition shifts (module docstring) of one space. A group has one label, so a meta description on
    ``label_columns`` alone says nothing of it: none."""
    label, fails = values["label"][near.rows], failed[near.rows]
    smallest = max(MIN_CORE, round(min_size * len(near.rows) / len(near.captured_rows)))
    cores = _cores(near, label, coherent_failures(near, failed)[near.rows], smallest)
    level = ALPHA / max(len(cores), 1)
    systematic, variants, shifted = [], [], np.zeros(len(failed), dtype=bool)
    for core in cores:
        if (label[near.neighbours[core]] == label[core][:, None]).mean() < AGREE:
            continue
        region = _region(near, label, core)
        failures, size = int((region & fails).sum()), int(region.sum())
        rest_rate = (int(fails.sum()) - failures) / max(len(region) - size, 1)
        if hypergeom.sf(failures - 1, len(region), int(fails.sum()), size) >= level or \
                beta.ppf(level, failures, size - failures + 1) < FAR_MORE * rest_rate:
            continue
        members = _members(near, values["label"], region)
        group = _group(near, values, failed, vocabulary, core, members, layer, label_columns)
        if isinstance(group, Subgroup):
            variants.append(group)
        elif _shifted(vocabulary, group, label_columns, values["label"] != label[core][0], failed):
            shifted |= members
        else:
            systematic.append(group)
    return (sorted(systematic, key=lambda g: -g.failures), sorted(variants, key=lambda g: -g.failure_rate),
            shifted)


def residual_variants(near: Neighbourhoods, values: dict[str, np.ndarray], failed: np.ndarray,
                      vocabulary: MetaVocabulary, min_size: int, layer: Optional[str], set_aside: np.ndarray
                      ) -> list[Subgroup]:
    """The variants of any label among the captured rows left once ``set_aside`` (a mask over the table: the rows of
    the reported slices and groups) is: the module docstring's last paragraph. Their cores link failures whatever
    their label (one label for all), the smallest core is scaled to the rows left and larger than any chance gives
    there (``_chance_core``), and only groups predicted as several classes are kept: failures of mixed labels
    predicted as one class are a shortcut's or a meta cause's, which the slices report."""
    left = neighbourhoods(near.space, np.where(set_aside[:, None], np.nan, near.vectors))
    if left is None:
        return []
    scaled = max(1, round(min_size * len(left.captured_rows) / len(near.captured_rows)))
    one_label = {**values, "label": np.zeros(len(failed), dtype=np.int64)}
    smallest = max(scaled, _chance_core(left, failed) + 1)
    _, variants, _ = failure_groups(left, one_label, failed, vocabulary, smallest, layer, frozenset())
    return [replace(variant, labels=len(np.unique(values["label"][np.isin(values["idx"], variant.idx)])))
            for variant in variants]


def _chance_core(near: Neighbourhoods, failed: np.ndarray, seed: int = 0) -> int:
    """The largest core, with one label for all, that the failures shuffled among the indexed rows give over
    ``SHUFFLES`` shufflings: what chance alone links in this space. Without a label to split them, coherent failures
    link into larger sets, so a core of the rows left must beat this (p < 1 / (SHUFFLES + 1))."""
    rng, one_label, largest = np.random.default_rng(seed), np.zeros(len(near.rows), dtype=np.int64), 0
    for _ in range(SHUFFLES):
        shuffled = failed.copy()
        shuffled[near.rows] = rng.permutation(failed[near.rows])
        coherent = coherent_failures(near, shuffled)[near.rows]
        largest = max(largest, int(_linked_sets(near, one_label, coherent)[1].max()))
    return largest


def _shifted(vocabulary: MetaVocabulary, group: TrainingLabelGroup, label_columns: frozenset[str],
             others: np.ndarray, failed: np.ndarray) -> bool:
    """Whether the group's meta description holds a condition, not on the label, under which the datapoints of the
    ``others`` labels fail significantly more too (one-sided Fisher exact test, p < ``SHIFTED_P``): the condition
    makes every label look like another class (a faulty sensor), not the group's training labels."""
    conditions = [c for c in group.meta_match.conditions if c.column not in label_columns] if group.meta_match \
        else []
    if not conditions:
        return False
    under = vocabulary.condition_rows(conditions) & others
    return bool(hypergeom.sf(int((under & failed).sum()) - 1, int(others.sum()), int((others & failed).sum()),
                             int(under.sum())) < SHIFTED_P)


def _members(near: Neighbourhoods, label: np.ndarray, region: np.ndarray) -> np.ndarray:
    """The group's datapoints as a mask over the table: its region and, where only some rows are indexed, every
    other captured row of its label whose nearest indexed rows are mostly in the region."""
    members = np.zeros(len(label), dtype=bool)
    members[near.rows[region]] = True
    others = np.setdiff1d(near.captured_rows, near.rows, assume_unique=True)
    others = others[label[others] == label[near.rows[region][0]]]
    if len(others):
        inside = region[near.index.kneighbors(near.vectors[others], n_neighbors=NEIGHBOURS)[1]].sum(axis=1)
        members[others[2 * inside > NEIGHBOURS]] = True
    return members


def _group(near: Neighbourhoods, values: dict[str, np.ndarray], failed: np.ndarray, vocabulary: MetaVocabulary,
           core: np.ndarray, members: np.ndarray, layer: Optional[str], label_columns: frozenset[str]
           ) -> TrainingLabelGroup | Subgroup:
    """A significant group (``core``: a mask over the indexed rows; ``members``: over the table) as a systematic
    group or a variant, described in meta terms."""
    match = vocabulary.best_match(members)
    match = None if match is None or on_the_label_alone(match.conditions, label_columns) else match
    target = Target(conditions=list(match.conditions) if match else [], debugger=near.space, layer=layer)
    idx, examples = values["idx"][members], values["idx"][near.rows[_typical(near, core)]].tolist()
    size, failing = int(members.sum()), np.flatnonzero(members & failed)
    rest = failed[near.captured_rows][~members[near.captured_rows]]
    rest_rate = float(rest.mean()) if len(rest) else 0.0
    predicted, consistency = _dominant(values["prediction"][failing])
    if consistency < CONSISTENT:
        return Subgroup(near.space, size, len(failing), len(failing) / size, rest_rate, idx, match, examples, target,
                        kind="variant")
    label = values["label"][near.rows]
    probability = values["probabilities"][failing, predicted] if "probabilities" in values else np.full(1, np.nan)
    agree = label[near.neighbours[core]] == label[core][:, None]
    return TrainingLabelGroup(near.space, class_name(values, label[core][0], "label"),
                              class_name(values, predicted, "prediction"), size, len(failing), len(failing) / size,
                              rest_rate, consistency, float(np.median(probability)), float(agree.mean()), idx, match,
                              examples, target)


def _cores(near: Neighbourhoods, label: np.ndarray, coherent: np.ndarray, min_size: int) -> list[np.ndarray]:
    """The connected sets of coherent failures (linked to the coherent failures of their label among their
    neighbours) of at least ``min_size`` rows, as masks over the indexed rows."""
    component, sizes = _linked_sets(near, label, coherent)
    return [coherent & (component == c) for c in np.flatnonzero(sizes >= min_size)]


def _linked_sets(near: Neighbourhoods, label: np.ndarray, coherent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each indexed row's connected set (``_cores``' links) and the number of coherent failures in each set."""
    source = np.repeat(np.arange(len(label)), NEIGHBOURS)
    target = near.neighbours.reshape(-1)
    linked = coherent[source] & coherent[target] & (label[source] == label[target])
    graph = coo_matrix((np.ones(int(linked.sum())), (source[linked], target[linked])), shape=(len(label),) * 2)
    _, component = connected_components(graph, directed=True, connection="weak")
    return component, np.bincount(component[coherent], minlength=component.max() + 1)


def _region(near: Neighbourhoods, label: np.ndarray, core: np.ndarray) -> np.ndarray:
    """The core and every indexed row of its label whose neighbours are mostly in it."""
    inside = core[near.neighbours].sum(axis=1)
    return core | ((label == label[core][0]) & (2 * inside > NEIGHBOURS))


def _typical(near: Neighbourhoods, core: np.ndarray) -> np.ndarray:
    """The positions of the core's EXAMPLES rows with the most of their neighbours in it: the heart of the group."""
    positions = np.flatnonzero(core)
    inside = core[near.neighbours[positions]].sum(axis=1)
    return positions[np.argsort(-inside, kind="stable")[:EXAMPLES]]


def _dominant(predictions: np.ndarray) -> tuple[int, float]:
    """The most common prediction and its share (a failure without a prediction, from logits that were not finite,
    counts as none of them)."""
    classes, counts = np.unique(predictions[np.isfinite(predictions)].astype(np.int64), return_counts=True)
    if not len(counts):
        return -1, 0.0
    return int(classes[np.argmax(counts)]), float(counts.max() / len(predictions))
