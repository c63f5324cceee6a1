"""Outcome restatements are never causes: a target score, a confidence, a margin or a copy of the prediction is kept
apart ("restates the failure"), whether a debugger declares it (``summary_roles``) or the model's output predicts
it; a real cause that makes the model fail is not mistaken for one.

The default example's case, measured by the issue: 18 of 500 fail, 17 of them occluded; Grad-CAM's target score was
the only slice and ``occluded`` was not named.
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis.failures import analyze_table
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.summaries import DebuggerSummaries
from tests.analysis.tables import probabilities_of, write_table

ROWS = 500
CLASSES = 6


def default_example_like(rng: np.random.Generator) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """30% occluded, 11% of them fail, 0.3% of the others; the logit of the predicted class (Grad-CAM's target
    score) is low where the model fails, as a restatement is."""
    occluded = rng.random(ROWS) < 0.3
    failed = rng.random(ROWS) < np.where(occluded, 0.11, 0.003)
    label = rng.integers(0, CLASSES, ROWS)
    prediction = np.where(failed, (label + 1) % CLASSES, label)
    margin = np.where(failed, rng.uniform(0.2, 1.5, ROWS), rng.uniform(1.0, 5.0, ROWS))
    probabilities, logsumexp = probabilities_of(rng, label, prediction, CLASSES, margin)
    target_score = np.log(probabilities[np.arange(ROWS), prediction]) + logsumexp
    columns = {"idx": np.arange(ROWS), "label": label, "prediction": prediction, "probabilities": probabilities,
               "logsumexp": logsumexp.astype(np.float32), "accuracy": (~failed).astype(float), "occluded": occluded,
               "scale": rng.random(ROWS), "gradcam.target_score": target_score.astype(np.float32),
               "gradcam.raw_max": (target_score * 0.1 + rng.normal(0, 0.01, ROWS)).astype(np.float32),
               "gradcam.centre_fraction": rng.random(ROWS).astype(np.float32)}
    return columns, occluded, failed


def test_grad_cams_declared_outcomes_are_restatements_and_the_real_mark_is_named(tmp_path):
    rng = np.random.default_rng(0)
    columns, occluded, failed = default_example_like(rng)
    summaries = ("gradcam.target_score", "gradcam.raw_max", "gradcam.centre_fraction")
    table = write_table(tmp_path / "epoch_table.parquet", columns, ["occluded", "scale"], {"accuracy": True},
                        summaries, outcome=["gradcam.target_score", "gradcam.raw_max"],
                        input_region=["gradcam.centre_fraction"])
    findings = analyze_table(table)
    assert findings.meta.slices[0].description == "occluded = True", [s.description for s in findings.meta.slices]
    restated = {r.column: r.why for r in findings.restatements}
    assert set(restated) == {"gradcam.target_score", "gradcam.raw_max"}
    assert all("declared an outcome by debugger 'gradcam'" in why for why in restated.values())
    named = [c.column for f in (findings.meta, findings.internals) for s in f.slices for c in s.conditions]
    named += [s.column for f in (findings.meta, findings.internals) for s in f.separators]
    assert not set(named) & set(restated), named


def test_gradcams_summary_roles_reach_the_epoch_tables_roles():
    """What ``GradCAMDebugger`` declares becomes the table's ``outcome`` and ``input_region`` roles."""
    summaries = DebuggerSummaries({"gradcam": GradCAMDebugger("backbone.layer4")}, log=None)
    assert summaries.column_roles() == {
        "outcome": ["gradcam.target_score", "gradcam.target_class", "gradcam.raw_max"],
        "input_region": [f"gradcam.{key}" for key in ("centroid_x", "centroid_y", "centroid_z", "centre_fraction",
                                                       "spread", "entropy")]}
    assert summaries.layers == {"gradcam": "backbone.layer4"}


def test_columns_the_output_predicts_are_caught_by_measure_and_real_causes_are_not(tmp_path):
    """Undeclared: a meta field holding the model's confidence, a summary holding the logit margin, a copy of the
    prediction's name. Real: ``marked`` (a contradicting marker: marked datapoints fail 60%, the others 5%) and
    ``probe.energy`` (higher where marked): the model fails because of them, but among one class's failures (or
    passes) the output does not tell which carry them."""
    rng = np.random.default_rng(1)
    rows = 2000
    marked = rng.random(rows) < 0.2
    failed = rng.random(rows) < np.where(marked, 0.6, 0.05)
    label = rng.integers(0, CLASSES, rows)
    prediction = np.where(failed, (label + rng.integers(1, CLASSES, rows)) % CLASSES, label)
    probabilities, logsumexp = probabilities_of(rng, label, prediction, CLASSES, rng.uniform(0.5, 4.0, rows))
    ordered = np.sort(probabilities, axis=1)
    names = np.array([f"class{c}" for c in range(CLASSES)], dtype=object)
    meta = {"marked": marked, "model_confidence": ordered[:, -1].astype(np.float64) + rng.normal(0, 1e-3, rows),
            "predicted_as": names[prediction], "dose": rng.random(rows)}
    summaries = {"probe.margin": (np.log(ordered[:, -1]) - np.log(ordered[:, -2])).astype(np.float32),
                 "probe.energy": (1.5 * marked + rng.normal(size=rows)).astype(np.float32)}
    columns = {"idx": np.arange(rows), "label": label, "prediction": prediction, "probabilities": probabilities,
               "logsumexp": logsumexp.astype(np.float32), "accuracy": (~failed).astype(float), **meta, **summaries}
    findings = analyze_table(write_table(tmp_path / "epoch_table.parquet", columns, list(meta), {"accuracy": True},
                                         tuple(summaries)))
    restated = {r.column: r.why for r in findings.restatements}
    assert set(restated) == {"model_confidence", "predicted_as", "probe.margin"}, restated
    assert all("the model's output predicts it" in why for why in restated.values())
    assert findings.meta.slices[0].description == "marked = True"
    assert [s.column for s in findings.internals.separators] == ["probe.energy"]


@pytest.mark.parametrize("seed", range(3))
def test_no_column_of_a_random_table_is_taken_for_a_restatement(tmp_path, seed):
    """Columns unrelated to the output (numbers, categories, flags) are never restatements."""
    rng = np.random.default_rng(seed)
    rows = 1500
    failed = rng.random(rows) < 0.2
    label = rng.integers(0, CLASSES, rows)
    prediction = np.where(failed, (label + 1) % CLASSES, label)
    probabilities, logsumexp = probabilities_of(rng, label, prediction, CLASSES, rng.uniform(0.5, 4, rows))
    meta = {f"x{j}": rng.normal(size=rows) for j in range(5)} | {"site": rng.choice(list("ABCD"), rows).astype(object),
                                                                 "flag": rng.random(rows) < 0.5}
    columns = {"idx": np.arange(rows), "label": label, "prediction": prediction, "probabilities": probabilities,
               "logsumexp": logsumexp.astype(np.float32), "accuracy": (~failed).astype(float), **meta}
    findings = analyze_table(write_table(tmp_path / "epoch_table.parquet", columns, list(meta), {"accuracy": True}))
    assert findings.restatements == []


@pytest.mark.parametrize("hooks_a_layer", [True, False])
def test_a_unit_that_drives_the_output_is_no_restatement_when_its_debugger_hooks_a_layer(tmp_path, hooks_a_layer):
    """A unit that fires on an artifact and flips the prediction: the output predicts its energy as well as it
    would a score computed from the output. Its debugger hooks a layer (the ``layers`` role), so its summary came
    before the output: an internal finding. Without that role it cannot be told from a restatement."""
    rng = np.random.default_rng(5)
    rows = 2000
    fired = rng.random(rows) < 0.2
    energy = np.where(fired, rng.uniform(5, 9, rows), rng.uniform(0, 0.5, rows))
    label = rng.integers(0, CLASSES, rows)
    prediction = np.where(fired, (label + 1) % CLASSES, label)
    probabilities, logsumexp = probabilities_of(rng, label, prediction, CLASSES, np.where(fired, energy, 2.0))
    columns = {"idx": np.arange(rows), "label": label, "prediction": prediction, "probabilities": probabilities,
               "logsumexp": logsumexp.astype(np.float32), "accuracy": (label == prediction).astype(float),
               "dose": rng.random(rows), "trigger.c3": energy.astype(np.float32),
               "trigger.c4": rng.random(rows).astype(np.float32)}
    layers = {"layers": {"trigger": "backbone.layer2.trigger"}} if hooks_a_layer else {}
    findings = analyze_table(write_table(tmp_path / "epoch_table.parquet", columns, ["dose"], {"accuracy": True},
                                         ("trigger.c3", "trigger.c4"), **layers))
    restated = [r.column for r in findings.restatements]
    assert restated == ([] if hooks_a_layer else ["trigger.c3"])
    if hooks_a_layer:
        assert findings.internals.separators[0].units[0].column == "trigger.c3"
