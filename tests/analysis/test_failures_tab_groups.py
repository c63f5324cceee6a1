"""The Failures tab in a real headless Chromium shows what tells label errors from groups that fail alike: the
systematic training-label group with its advice, the rare variant marked among the subgroups, why label suspects
were left out, the data map's note and its still-learning datapoints; a click on the group or on the still-learning
button narrows the table and the score grid to exactly its datapoints.

The run is the small planted one with its validation epochs rewritten from a known truth (``tables.planted_groups``:
its feature space as the last epoch's debug outputs, its probabilities rising over the epochs), so the tab's findings
are those of a trainer's real run folder."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from analysis.epoch_table import EpochTable, write_epoch_table
from analysis.failures import analyze
from debuggers.pages.writer import PageWriter
from run_dir.names import EPOCH_TABLE_FILE, VALIDATION_SCORES_FILE
from runners.eval_viewer.failures.ids import FAILURES_FILTER_NOTE, FAILURES_FINDING, FAILURES_MORE, TAB_FAILURES
from runners.eval_viewer.scores.ids import SCORE_GRID
from tests.analysis.tables import planted_groups
from tests.e2e.conftest import SLOW_WAIT_MS, expect, serve_viewer
from tests.e2e.viewer_page import wait_caption

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
NAMES = np.array(["circle", "square", "triangle", "cross"], dtype=object)
GRID_IDX = """() => {
    const grid = document.getElementById('GRID').scoreGrid;
    return grid ? grid.idx.filter(idx => idx >= 0) : null;
}""".replace("GRID", SCORE_GRID)


@pytest.fixture(scope="module")
def grouped_run(planted_run, tmp_path_factory):
    """A copy of the planted run whose every validation epoch holds ``planted_groups``' labels, the model's
    probabilities drawn from uniform towards the last epoch's (a model still learning), and the last epoch's debug
    outputs its feature space."""
    folder = str(tmp_path_factory.mktemp("grouped") / "grouped")
    shutil.copytree(planted_run["work_dir"], folder)
    epochs = sorted(int(name.split("_")[1]) for name in os.listdir(folder) if name.startswith("epoch_"))
    rows = EpochTable(os.path.join(folder, f"epoch_{epochs[-1]}", EPOCH_TABLE_FILE)).count()
    truth = planted_groups(np.random.default_rng(11), rows, classes=4)
    for step, epoch in enumerate(epochs):
        weight = ((step + 1) / len(epochs)) ** 2  # slow at first, then fast: still rising at the end
        write_epoch(os.path.join(folder, f"epoch_{epoch}"), truth.label,
                    (1 - weight) / 4 + weight * truth.probabilities)
    debugger = os.path.join(folder, f"epoch_{epochs[-1]}", "debugger")
    shutil.rmtree(debugger)
    with PageWriter(1 << 20) as writer:
        writer.start_epoch(debugger)
        for i, vector in enumerate(truth.vectors):
            writer.add(i, {"pooled": vector})
        writer.flush()
    return folder, truth


def write_epoch(epoch_dir: str, label: np.ndarray, probabilities: np.ndarray) -> None:
    """The epoch's table and per-datapoint scores for these labels and probabilities (its stored findings left
    out: the tab computes them)."""
    prediction = probabilities.argmax(axis=1)
    accuracy = (prediction == label).astype(float)
    write_epoch_table(os.path.join(epoch_dir, EPOCH_TABLE_FILE), {
        "idx": np.arange(len(label)), "label": label, "prediction": prediction, "label_name": NAMES[label],
        "prediction_name": NAMES[prediction], "probabilities": probabilities.astype(np.float32),
        "accuracy": accuracy}, {"scores": ["accuracy"], "higher_is_better": {"accuracy": True}})
    with open(os.path.join(epoch_dir, VALIDATION_SCORES_FILE), "w") as scores:
        json.dump({"aggregated": {"accuracy": accuracy.mean()}, "per_datapoint": {"accuracy": accuracy.tolist()}},
                  scores)
    if os.path.exists(os.path.join(epoch_dir, "findings.json")):
        os.remove(os.path.join(epoch_dir, "findings.json"))


def finding_button(page, key: str):
    return page.locator(f"""[id='{{"index":"{key}","type":"{FAILURES_FINDING}"}}']""")


def narrow(page, key: str, expected: list[int], total: int) -> None:
    """Click the finding ``key``: the table and the score grid show exactly ``expected``."""
    finding_button(page, key).click()
    page.wait_for_selector(f"#{FAILURES_FILTER_NOTE}:has-text('filtered to {len(expected)} datapoints')")
    wait_caption(page, f"{len(expected)} of {total} datapoints match")
    page.wait_for_function(f"() => ({GRID_IDX})()?.length === {len(expected)}")
    assert sorted(page.evaluate(GRID_IDX)) == sorted(expected)


def test_the_tab_tells_groups_from_label_errors_and_says_the_model_was_still_learning(grouped_run, new_page):
    folder, truth = grouped_run
    findings = analyze(folder)
    [group] = findings.training_label_groups
    assert (group.label, group.predicted) == ("circle", "square")
    assert np.isin(group.idx, np.flatnonzero(truth.systematic)).mean() > 0.9
    [variant] = [g for g in findings.subgroups if g.kind == "variant"]
    assert np.isin(variant.idx, np.flatnonzero(truth.variant)).mean() > 0.9
    assert findings.label_issues_note and findings.data_map.note and len(findings.data_map.still_learning)
    total = findings.datapoints
    with serve_viewer([os.path.dirname(folder)]) as url:
        page = new_page(f"{url}/?run={folder}&tab={TAB_FAILURES}")
        page.set_default_timeout(SLOW_WAIT_MS)  # the tab analyses the epoch on first show: slow on a busy machine
        more = page.locator(f"#{FAILURES_MORE}")
        expect(more, SLOW_WAIT_MS).to_contain_text(f"circle → square: {group.size} datapoints")
        text = more.inner_text()
        assert "check the TRAINING labels" in text and f"{group.consistency:.0%} of its failures predicted as square" \
            in text
        assert f"rare variant: {variant.size} datapoints" in text
        assert page.locator(".suspects-note").inner_text() == findings.label_issues_note
        assert page.locator(".data-map-note").inner_text() == findings.data_map.note
        assert f"{len(findings.data_map.still_learning)} still-learning datapoints" in text
        narrow(page, "trainlabels-0", group.idx.tolist(), total)
        narrow(page, "map-learning", findings.data_map.still_learning.tolist(), total)
