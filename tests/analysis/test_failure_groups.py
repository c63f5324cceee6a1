"""Groups that fail alike told apart from label noise on tables where the truth is known: a systematic
training-label group (one class's subgroup that the model calls another class every time, its validation labels
right), a rare variant (one class's inputs the model has not learnt, predicted as several classes) and uniform label
flips. Every reported figure is recomputed here from its definition.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import binom
from sklearn.neighbors import NearestNeighbors

from analysis.failure_groups import COHERENT_P, NEIGHBOURS
from analysis.failures import analyze_table
from analysis.findings import Findings
from analysis.internals import CapturedInternals
from analysis.subgroups import reduced_space
from runners.analyze import format_findings
from tests.analysis.tables import nearest_centre_model, planted_groups, write_table

CLASSES = 5
ROWS = 3000
DIM = 8
NAMES = np.array(["circle", "square", "ring", "cross", "bar"], dtype=object)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """5 classes: a systematic group of circles called squares every time, a variant of rings called a circle, a
    square or a cross at random, 4% of the labels flipped (``tables.planted_groups``)."""
    rng = np.random.default_rng(3)
    truth = planted_groups(rng, ROWS)
    label, probabilities = truth.label, truth.probabilities
    prediction = probabilities.argmax(axis=1)
    columns = {"idx": np.arange(ROWS), "label": label, "prediction": prediction, "label_name": NAMES[label],
               "prediction_name": NAMES[prediction], "probabilities": probabilities,
               "accuracy": (label == prediction).astype(float), "site": rng.choice(list("ABC"), ROWS).astype(object)}
    table = write_table(tmp_path_factory.mktemp("groups") / "epoch_table.parquet", columns, ["site"],
                        {"accuracy": True})
    space = CapturedInternals({"pooled": (np.arange(ROWS), truth.vectors)}, [])
    return analyze_table(table, space), columns, truth.vectors, truth.systematic, truth.variant, truth.flipped


def test_the_systematic_group_is_one_group_with_what_it_is_predicted_as(planted):
    findings, columns, vectors, systematic, _, _ = planted
    assert len(findings.training_label_groups) == 1
    group = findings.training_label_groups[0]
    members = np.isin(np.arange(ROWS), group.idx)
    assert (members & systematic).sum() >= 0.8 * systematic.sum() and systematic[members].mean() >= 0.9
    assert (group.label, group.predicted) == ("circle", "square")
    failed = columns["label"] != columns["prediction"]
    assert group.size == members.sum() and group.failures == (members & failed).sum()
    assert group.failure_rate == pytest.approx(failed[members].mean())
    assert group.rest_failure_rate == pytest.approx(failed[~members].mean())
    failing = members & failed
    assert group.consistency == pytest.approx((columns["prediction"][failing] == 1).mean())
    assert group.confidence == pytest.approx(float(np.median(columns["probabilities"][failing, 1])))
    assert group.description == "no meta column describes it"
    assert set(group.examples) <= set(np.flatnonzero(members & systematic)) and len(group.examples) == 5


def test_the_group_is_found_from_coherent_failures_as_defined(planted):
    """Independently: the failures whose 10 nearest neighbours (in the standardised 16-dimensional space) fail
    significantly more than the space's rate; the group's core is among them, and its neighbours-share-the-label
    figure is the share of its core's neighbours with the same label."""
    findings, columns, vectors, systematic, _, _ = planted
    failed = columns["label"] != columns["prediction"]
    space = reduced_space(vectors)
    near = NearestNeighbors(n_neighbors=NEIGHBOURS + 1).fit(space).kneighbors(space)[1][:, 1:]
    coherent = failed & (binom.sf(failed[near].sum(axis=1) - 1, NEIGHBOURS, failed.mean()) < COHERENT_P)
    group = findings.training_label_groups[0]
    members = np.isin(np.arange(ROWS), group.idx)
    core = members & coherent & (columns["label"] == 0)
    assert core.sum() >= 0.9 * (members & failed).sum()
    assert group.neighbours_agree == pytest.approx((columns["label"][near[core]] == 0).mean(), abs=0.02)


def test_the_variant_is_a_subgroup_and_neither_is_a_list_of_label_suspects(planted):
    findings, _, _, systematic, variant, flipped = planted
    variants = [group for group in findings.subgroups if group.kind == "variant"]
    assert len(variants) == 1
    members = np.isin(np.arange(ROWS), variants[0].idx)
    assert (members & variant).sum() >= 0.8 * variant.sum() and variant[members].mean() >= 0.9
    listed = np.array([issue.idx for issue in findings.label_issues])
    assert not (systematic[listed] | variant[listed]).any()
    assert flipped[listed].mean() >= 0.9 and len(listed) == 10


def test_label_suspects_rank_confident_disagreements_the_neighbours_back_first(planted):
    """Ranked by margin times the share of neighbours with the suggested label; none is listed whose neighbours
    mostly carry another label, and the note counts them."""
    findings, columns, vectors, _, _, _ = planted
    space = reduced_space(vectors)
    near = NearestNeighbors(n_neighbors=NEIGHBOURS + 1).fit(space).kneighbors(space)[1][:, 1:]
    scores = []
    for issue in findings.label_issues:
        p = columns["probabilities"][issue.idx]
        assert issue.margin == pytest.approx(float(p.max() - p[columns["label"][issue.idx]]))
        backing = (columns["label"][near[issue.idx]] == p.argmax()).mean()
        assert issue.neighbours_suggest == pytest.approx(backing) and backing >= 0.5
        scores.append(issue.margin * backing)
    assert scores == sorted(scores, reverse=True)
    assert "left out of cleanlab's suspects" in findings.label_issues_note


def test_random_failures_in_an_uninformative_space_give_no_group(tmp_path):
    """30% fail at random, with a feature space that says nothing of it: every group would be a false one."""
    for seed in range(8):
        rng = np.random.default_rng(seed)
        failed = rng.random(1000) < 0.3
        label = rng.integers(0, 4, 1000)
        prediction = np.where(failed, (label + rng.integers(1, 4, 1000)) % 4, label)
        probabilities = np.full((1000, 4), 0.1, dtype=np.float32)
        probabilities[np.arange(1000), prediction] = 0.7
        table = write_table(tmp_path / f"table_{seed}.parquet", {
            "idx": np.arange(1000), "label": label, "prediction": prediction, "probabilities": probabilities,
            "accuracy": (~failed).astype(float)}, [], {"accuracy": True})
        space = CapturedInternals({"pooled": (np.arange(1000), rng.normal(size=(1000, 8)))}, [])
        findings = analyze_table(table, space)
        assert findings.training_label_groups == [] and findings.subgroups == [], seed


def test_the_report_names_the_group_and_says_to_check_the_training_labels(planted):
    findings = planted[0]
    text = format_findings(findings)
    group = findings.training_label_groups[0]
    assert "Systematic training-label groups" in text and "circle → square" in text
    assert f"#1: check the TRAINING labels of datapoints like these ({group.failures} of {group.size}" in text
    assert "rare variant" in text


def test_a_condition_that_makes_every_label_look_like_one_class_is_no_training_label_group(tmp_path):
    """A faulty sensor (C, 15% of the datapoints, validation only) makes every class look like a bar: each label's
    sensor-C datapoints fail alike as bars, but the condition, which the meta slice names, is the cause, not their
    training labels. Its datapoints are no label suspects either."""
    rng = np.random.default_rng(8)
    centres = rng.normal(0, 3, size=(CLASSES, DIM))
    truth = rng.integers(0, 4, ROWS)
    faulty = rng.random(ROWS) < 0.15
    vectors = centres[truth] + rng.normal(0, 1.0, size=(ROWS, DIM))
    vectors[faulty] = 0.7 * centres[4] + 0.3 * centres[truth[faulty]] + rng.normal(0, 0.4, (int(faulty.sum()), DIM))
    probabilities = nearest_centre_model(rng, vectors, centres)
    prediction = probabilities.argmax(axis=1)
    sensor = np.where(faulty, "C", rng.choice(["A", "B"], ROWS)).astype(object)
    table = write_table(tmp_path / "epoch_table.parquet", {
        "idx": np.arange(ROWS), "label": truth, "prediction": prediction, "label_name": NAMES[truth],
        "prediction_name": NAMES[prediction], "probabilities": probabilities,
        "accuracy": (truth == prediction).astype(float), "sensor": sensor}, ["sensor"], {"accuracy": True})
    findings = analyze_table(table, CapturedInternals({"pooled": (np.arange(ROWS), vectors.astype(np.float32))}, []))
    assert (prediction[faulty] == 4).mean() > 0.9  # each label's faulty datapoints fail alike, as bars
    assert findings.meta.slices[0].description == "sensor = C"
    assert findings.training_label_groups == []
    assert not faulty[[issue.idx for issue in findings.label_issues]].any()


def test_the_groups_and_notes_survive_the_findings_file(planted):
    """Stored as findings.json and read back (what the viewer reads): every new field as it was."""
    findings = planted[0]
    back = Findings.from_dict(json.loads(json.dumps(findings.to_dict())))
    [group], [stored] = findings.training_label_groups, back.training_label_groups
    assert (stored.label, stored.predicted, stored.size, stored.consistency, stored.examples) == \
        (group.label, group.predicted, group.size, group.consistency, group.examples)
    assert np.array_equal(stored.idx, np.sort(group.idx))
    assert [g.kind for g in back.subgroups] == [g.kind for g in findings.subgroups]
    assert back.label_issues_note == findings.label_issues_note
    assert [(i.margin, i.neighbours_suggest) for i in back.label_issues] == \
        [(i.margin, i.neighbours_suggest) for i in findings.label_issues]


def _channel_and_variant_table(tmp_path, variant_share: float, seed: int = 5):
    """4 classes; a noisy channel (15%, meta ``channel``) loses every class's evidence: its datapoints sit in the
    middle of the space and fail at random, of every label. A variant of every class (``variant_share``, no meta
    column) sits beside them, as a model that never learnt it sees it, and fails at random too."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 3, size=(4, DIM))
    truth = rng.integers(0, 4, ROWS)
    noisy = rng.random(ROWS) < 0.15
    variant = ~noisy & (rng.random(ROWS) < variant_share)
    middle, aside = centres.mean(axis=0), rng.normal(0, 1, DIM)
    vectors = centres[truth] + rng.normal(0, 1.0, size=(ROWS, DIM))
    vectors[noisy] = middle + rng.normal(0, 1.0, (int(noisy.sum()), DIM))
    vectors[variant] = middle + 1.5 * aside / np.linalg.norm(aside) + rng.normal(0, 0.4, (int(variant.sum()), DIM))
    probabilities = nearest_centre_model(rng, vectors, centres)
    unsure = noisy | variant
    probabilities[unsure] = 0.1
    probabilities[np.flatnonzero(unsure), rng.integers(0, 4, int(unsure.sum()))] = 0.7
    prediction = probabilities.argmax(axis=1)
    table = write_table(tmp_path / f"epoch_table_{variant_share}.parquet", {
        "idx": np.arange(ROWS), "label": truth, "prediction": prediction, "label_name": NAMES[truth],
        "prediction_name": NAMES[prediction], "probabilities": probabilities,
        "accuracy": (truth == prediction).astype(float),
        "channel": np.where(noisy, "noisy", rng.choice(["chat", "mail"], ROWS)).astype(object)},
        ["channel"], {"accuracy": True})
    space = CapturedInternals({"pooled": (np.arange(ROWS), vectors.astype(np.float32))}, [])
    return analyze_table(table, space), truth, truth != prediction, variant


def test_a_variant_of_every_label_beside_a_noisy_channel_is_found_among_what_the_slice_leaves(tmp_path):
    """In the whole space the variant's failures sit among the channel's, of every label: no group of one label
    holds them. Once the channel's slice is set aside, they are one variant of several labels, after the others."""
    findings, label, failed, variant = _channel_and_variant_table(tmp_path, 0.03)
    assert findings.meta.slices[0].description == "channel = noisy"
    [found] = [group for group in findings.subgroups if group.kind == "variant"]
    members = np.isin(np.arange(ROWS), found.idx)
    assert (members & variant & failed).sum() >= 0.8 * (variant & failed).sum() and variant[members].mean() >= 0.8
    assert found.labels == len(np.unique(label[members])) > 1
    assert found.kind_name.startswith(f"rare variant of {found.labels} labels")
    assert found.failures == (members & failed).sum() and found.size == members.sum()
    assert f"rare variant of {found.labels} labels" in format_findings(findings)


def test_without_a_variant_nothing_is_found_among_what_the_slice_leaves(tmp_path):
    """The same channel with no variant: what the slice leaves holds no group (a false one would be reported)."""
    findings, _, _, _ = _channel_and_variant_table(tmp_path, 0.0)
    assert findings.meta.slices[0].description == "channel = noisy"
    assert [group for group in findings.subgroups if group.kind == "variant"] == []
