"""The failure analysis on epoch tables with known structure, checked against independent computations."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from scipy.stats import mannwhitneyu

from analysis.epoch_table import EpochTable, write_epoch_table
from analysis.failures import AnalysisError, FailureDefinition, analyze, analyze_table
from debuggers.pages.writer import PageWriter
from runners.analyze import format_findings
from tests.reliability.crafted_index import LOCATION_DAMAGES, damage_debug_files
from tests.runs import REPO_ROOT

ROWS = 3000
CLASSES = ("circle", "square", "ring")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """An evaluator-like folder whose table has one planted failing slice, a lucky tiny group, label flips."""
    rng = np.random.default_rng(0)
    occluded = rng.random(ROWS) < 0.3
    contrast = rng.uniform(0.0, 1.0, ROWS)
    rare = np.zeros(ROWS, dtype=bool)
    rare[rng.choice(ROWS, 6, replace=False)] = True
    fail_probability = np.where(occluded & (contrast < 0.25), 0.85, 0.1)
    failed = (rng.random(ROWS) < fail_probability) | rare
    label = rng.integers(0, 3, ROWS)
    prediction = np.where(failed, (label + rng.integers(1, 3, ROWS)) % 3, label)
    probabilities = np.full((ROWS, 3), 0.1, dtype=np.float32)
    probabilities[np.arange(ROWS), prediction] = 0.8
    flipped = np.flatnonzero(~failed)[:15]  # the model is very sure of another class than the label
    label[flipped] = (prediction[flipped] + 1) % 3
    probabilities[flipped] = 0.005
    probabilities[flipped, prediction[flipped]] = 0.99
    prediction_fails = label != prediction
    folder = tmp_path_factory.mktemp("table_run")
    write_epoch_table(str(folder / "epoch_table.parquet"), {
        "idx": np.arange(ROWS), "label": label, "prediction": prediction,
        "label_name": np.array(CLASSES, dtype=object)[label],
        "prediction_name": np.array(CLASSES, dtype=object)[prediction], "probabilities": probabilities,
        "accuracy": (~prediction_fails).astype(float), "occluded": occluded, "contrast": contrast,
        "source": np.where(rare, "rare", "common").astype(object),
        "layer3.sparsity": contrast + rng.normal(0, 0.3, ROWS),
        "layer3.energy.c0": contrast + rng.normal(0, 0.3, ROWS), "layer3.energy.c1": np.zeros(ROWS),
        "layer3.nonfinite_ratio": np.zeros(ROWS),  # constant in a healthy model: no unit, never "dead"
    }, {"scores": ["accuracy"], "higher_is_better": {"accuracy": True}, "meta": ["occluded", "contrast", "source"],
        "summaries": ["layer3.sparsity", "layer3.energy.c0", "layer3.energy.c1", "layer3.nonfinite_ratio"]})
    return str(folder), flipped, prediction_fails


def test_the_planted_slice_ranks_first_and_a_lucky_tiny_group_does_not_win(run_dir):
    folder, _, failed = run_dir
    findings = analyze(folder)
    top = findings.meta.slices[0]
    assert {c.column for c in top.conditions} == {"occluded", "contrast"}
    assert re.fullmatch(r"occluded = True and contrast < 0\.2\d*", top.description), top.description
    members = np.array(top.idx)
    assert top.size == len(members) and top.failure_rate == pytest.approx(failed[members].mean())
    rest = np.setdiff1d(np.arange(ROWS), members)
    assert top.rest_failure_rate == pytest.approx(failed[rest].mean())
    assert top.failure_rate > 0.7 and top.rest_failure_rate < 0.2
    assert not any("source = rare" in s.description for s in findings.meta.slices)  # 6 of 6 fail, but only 6
    assert findings.failures == failed.sum() and findings.datapoints == ROWS


def test_separating_quantities_match_the_mann_whitney_statistic(run_dir):
    folder, _, failed = run_dir
    findings = analyze(folder)
    by_column = {s.column: s for s in findings.meta.separators}
    contrast = EpochTable(folder + "/epoch_table.parquet").values(["contrast"])["contrast"]
    u = mannwhitneyu(contrast[failed], contrast[~failed]).statistic
    auc = u / (failed.sum() * (~failed).sum())
    assert by_column["contrast"].auroc == pytest.approx(max(auc, 1 - auc))
    assert by_column["contrast"].direction == "lower in failures"
    assert "accuracy" not in by_column  # a score restates the failure: never a finding
    assert [d.column for d in findings.dead_units] == ["layer3.energy.c1"]  # a unit among units that respond


def test_confidently_contradicted_labels_top_the_label_error_list(run_dir):
    """The flipped labels top the list, most confident disagreement first; those inside a reported slice failing
    at least twice the rest (the planted one fails 8 times; an internal slice on layer3.sparsity, which follows
    contrast, takes some too) are taken for its failures, with its other suspects."""
    folder, flipped, failed = run_dir
    findings = analyze(folder, top=15)
    grouped = [group for group in findings.suspect_groups if len(group.idx) < ROWS / 2]
    assert len(grouped) == len(findings.suspect_groups)
    for group in grouped:
        inside = np.isin(np.arange(ROWS), group.idx)
        assert failed[inside].mean() >= 2 * failed[~inside].mean()
    alone = set(flipped.tolist()) - set(np.concatenate([group.idx for group in grouped]).tolist())
    issues = findings.label_issues
    assert {issue.idx for issue in issues[:len(alone)]} == alone and len(alone) >= 6
    margins = [issue.margin for issue in issues]
    assert margins == sorted(margins, reverse=True)
    assert issues[0].margin == pytest.approx(0.99 - 0.005, abs=1e-6)
    assert issues[0].label in CLASSES and issues[0].suggested in CLASSES


def test_a_metric_failure_definition_takes_the_worst_fraction_in_the_right_direction(tmp_path):
    loss = np.linspace(0.0, 9.9, 100)
    write_epoch_table(str(tmp_path / "epoch_table.parquet"), {"idx": np.arange(100), "loss": loss},
                      {"scores": ["loss"], "higher_is_better": {"loss": False}})
    table = EpochTable(str(tmp_path / "epoch_table.parquet"))
    findings = analyze_table(table, failure=FailureDefinition(metric="loss", worst_fraction=0.2))
    assert findings.failures == 20 and "worst 20% of loss" in findings.failure_definition
    with pytest.raises(AnalysisError, match="worst_fraction"):
        analyze_table(table, failure=FailureDefinition(metric="loss", worst_fraction=2))


@pytest.mark.slow
def test_the_command_prints_the_same_findings_as_the_function(run_dir):
    folder, _, _ = run_dir
    result = subprocess.run([sys.executable, "-m", "runners.analyze", "--run", folder, "--json"], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    expected = analyze(folder).to_dict()
    assert json.loads(result.stdout) == json.loads(json.dumps(expected))
    text = subprocess.run([sys.executable, "-m", "runners.analyze", "--run", folder], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120).stdout
    assert expected["meta"]["slices"][0]["description"] in text


def test_a_folder_without_a_table_is_explained(tmp_path):
    result = subprocess.run([sys.executable, "-m", "runners.analyze", "--run", str(tmp_path)], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "holds no epoch table" in result.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("damage", LOCATION_DAMAGES)
def test_unreadable_debug_outputs_are_skipped_and_the_report_says_so(tmp_path, damage):
    rows = 200
    label = np.arange(rows) % 3
    prediction = np.where(np.arange(rows) % 4 == 0, (label + 1) % 3, label)
    write_epoch_table(str(tmp_path / "epoch_table.parquet"), {"idx": np.arange(rows), "label": label,
                                                              "prediction": prediction})
    with PageWriter(4096) as writer:
        writer.start_epoch(str(tmp_path / "debugger"))
        for idx in range(rows):
            writer.add(idx, {"fm": torch.full((4,), float(idx))})
        writer.flush()
    damage_debug_files(str(tmp_path / "debugger"), damage)
    findings = analyze(str(tmp_path))
    assert findings.datapoints == rows and findings.failures == 50 and findings.subgroups == []
    [note] = findings.notes
    assert str(tmp_path / "debugger") in note and "were skipped" in note and "rerun the epoch" in note
    assert f"note: {note}" in format_findings(findings)


def test_a_folder_of_runs_names_them_and_an_epoch_folder_takes_its_own_epoch(tmp_path):
    for run, epoch in (("cnn", 2), ("vit", 1)):
        (tmp_path / run / f"epoch_{epoch}").mkdir(parents=True)
        write_epoch_table(str(tmp_path / run / f"epoch_{epoch}" / "epoch_table.parquet"),
                          {"idx": np.arange(20), "label": np.arange(20) % 2, "prediction": np.zeros(20, int)})
    result = subprocess.run([sys.executable, "-m", "runners.analyze", "--run", str(tmp_path)], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "is a folder of runs, not a run" in result.stderr
    assert "runs here: cnn, vit" in result.stderr
    assert analyze(str(tmp_path / "cnn" / "epoch_2"), epoch=2).datapoints == 20
    with pytest.raises(AnalysisError, match="no epoch table for epoch 3"):
        analyze(str(tmp_path / "cnn"), epoch=3)


def test_the_label_error_header_says_how_the_list_is_ordered(run_dir):
    text = format_findings(analyze(run_dir[0]))
    assert ("Suspected label errors (cleanlab; not in a group; the most confident disagreement its neighbours back "
            "first)") in text
