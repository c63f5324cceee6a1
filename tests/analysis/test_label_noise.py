"""Suspected label errors told apart from a systematic subgroup that looks like them, and the data map of a run's
validation epochs (confidence, variability, forgetting events) read from its epoch tables.

The issue's independent project: a small subgroup marked only in its inputs, failing at more than 80%, appeared only
as "suspected label errors", all of the top 10: that sends the user to relabel, when the fix is the data.
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis.data_map import KINDS, read_history
from analysis.epoch_table import write_epoch_table
from analysis.failures import analyze_table
from analysis.internals import CapturedInternals
from tests.analysis.tables import write_table

CLASSES = 5
ROWS = 2500
DIM = 8


def model_of(rng: np.random.Generator, vectors: np.ndarray, centres: np.ndarray, sharpness: float = 3.0
             ) -> np.ndarray:
    """Probabilities of a model that predicts the class whose centre is nearest to a datapoint's embedding."""
    distances = ((vectors[:, None, :] - centres[None]) ** 2).sum(axis=2)
    logits = -sharpness * distances / DIM + rng.normal(0, 0.2, size=distances.shape)
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (probabilities / probabilities.sum(axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def suspects(tmp_path_factory):
    """Datapoints embedded near their true class's centre. 4% have a flipped label (they still look like their
    class: the model contradicts the label). 3% are a subgroup of class 0 drawn apart, close to class 1's centre,
    so the model calls them 1 every time, with correct labels: a confusion of one class pair, as label noise in one
    class pair would be, but its members sit together and fail together."""
    rng = np.random.default_rng(4)
    centres = rng.normal(0, 3, size=(CLASSES, DIM))
    truth = rng.integers(0, CLASSES, ROWS)
    subgroup = (truth == 0) & (rng.random(ROWS) < 0.15)
    flipped = ~subgroup & (rng.random(ROWS) < 0.04)
    label = np.where(flipped, (truth + rng.integers(1, CLASSES, ROWS)) % CLASSES, truth)
    vectors = centres[truth] + rng.normal(0, 1.0, size=(ROWS, DIM))
    vectors[subgroup] = centres[1] + 1.6 + rng.normal(0, 0.3, size=(int(subgroup.sum()), DIM))
    probabilities = model_of(rng, vectors, centres)
    prediction = probabilities.argmax(axis=1)
    columns = {"idx": np.arange(ROWS), "label": label, "prediction": prediction, "probabilities": probabilities,
               "accuracy": (label == prediction).astype(float), "site": rng.choice(list("ABC"), ROWS).astype(object)}
    table = write_table(tmp_path_factory.mktemp("suspects") / "epoch_table.parquet", columns, ["site"],
                        {"accuracy": True})
    space = CapturedInternals({"pooled": (np.arange(ROWS), vectors.astype(np.float32))}, [])
    return table, space, subgroup, flipped


def test_a_subgroup_that_looks_like_label_noise_is_reported_as_a_subgroup(suspects):
    table, space, subgroup, flipped = suspects
    findings = analyze_table(table, space)
    grouped = np.concatenate([g.idx for g in findings.suspect_groups]) if findings.suspect_groups else np.zeros(0)
    members = np.flatnonzero(subgroup)
    assert np.isin(members, grouped).mean() > 0.8  # the subgroup's suspects are a systematic group ...
    listed = [issue.idx for issue in findings.label_issues]
    assert not set(listed) & set(members.tolist())  # ... never label suspects
    assert np.mean(flipped[listed]) >= 0.9, [(i.idx, i.label, i.suggested) for i in findings.label_issues]
    assert all(issue.neighbours_failing is not None for issue in findings.label_issues)


def test_without_a_feature_space_the_suspects_keep_cleanlabs_order(suspects):
    table, _, subgroup, flipped = suspects
    findings = analyze_table(table)
    confidences = [issue.self_confidence for issue in findings.label_issues]
    assert confidences == sorted(confidences) and len(confidences) == 10
    assert all(issue.neighbours_failing is None for issue in findings.label_issues)


def test_the_data_map_reads_each_datapoints_history_from_the_epoch_tables(tmp_path):
    """Five validation epochs of a run: confidence and variability are the mean and standard deviation of p(label)
    over epochs 1-4 (the first is left out), forgetting events the right-then-wrong steps, the kinds by them."""
    rng = np.random.default_rng(9)
    rows, epochs = 300, 5
    label = rng.integers(0, 3, rows)
    history = rng.random((epochs, rows))
    right = []
    for epoch in range(epochs):
        others = (1 - history[epoch])[:, None] * np.array([0.7, 0.3])
        probabilities = np.empty((rows, 3), dtype=np.float32)
        for i in range(rows):
            probabilities[i, label[i]] = history[epoch, i]
            probabilities[i, [c for c in range(3) if c != label[i]]] = others[i]
        prediction = probabilities.argmax(axis=1)
        right.append(prediction == label)
        folder = tmp_path / "run" / f"epoch_{epoch}"
        folder.mkdir(parents=True)
        write_epoch_table(str(folder / "epoch_table.parquet"), {
            "idx": np.arange(rows), "label": label, "prediction": prediction, "probabilities": probabilities,
            "accuracy": (prediction == label).astype(float)}, {"scores": ["accuracy"]})
    notes: list[str] = []
    found = read_history(str(tmp_path / "run" / "epoch_4"), np.arange(rows), notes)
    kept = history[1:].astype(np.float32).astype(np.float64)
    assert found.epochs == [1, 2, 3, 4] and not notes
    assert np.allclose(found.confidence, kept.mean(axis=0)) and np.allclose(found.variability, kept.std(axis=0))
    right = np.stack(right[1:])
    assert np.array_equal(found.forgetting, (right[:-1] & ~right[1:]).sum(axis=0)) and found.forgetting.any()
    kinds = found.kinds()
    assert np.array_equal(kinds == KINDS.index("ambiguous"), found.variability >= 0.2)
    assert np.array_equal(kinds == KINDS.index("hard to learn"), (found.variability < 0.2) & (found.confidence < 0.5))
    assert read_history(str(tmp_path / "run" / "epoch_1"), np.arange(rows), notes) is None  # two epochs: too few
