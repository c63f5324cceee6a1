"""Run against run: two epochs joined by idx, each datapoint's change against a count made here from the two
tables, filtered and sorted like the datapoint table, and malformed or hostile requests answered with a message."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from analysis.epoch_table import EpochTableError, write_epoch_table
from run_dir.names import EPOCH_TABLE_FILE
from runners.eval_viewer.compare_runs.data import (
    RIGHT_TO_WRONG,
    WRONG_TO_RIGHT,
    RunDiffError,
    RunDiffs,
    Side,
    diff_rows,
)
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import BadRequest

NAMES = np.array(["circle", "square", "triangle", "cross", "ring", "bar"], dtype=object)
ROLES = {"scores": ["accuracy", "cross_entropy"], "higher_is_better": {"accuracy": True, "cross_entropy": False},
         "meta": [], "summaries": []}


def write_run(folder, name: str, epochs: list[dict]) -> str:
    """A trainer run whose epochs are the given columns (epoch tables only, as the viewer reads them)."""
    run = os.path.join(folder, name)
    os.makedirs(run)
    with open(os.path.join(run, "run_info.json"), "w") as f:
        json.dump({"runner": "BaseTrainer"}, f)
    for number, columns in enumerate(epochs):
        os.makedirs(os.path.join(run, f"epoch_{number}"))
        label, prediction = columns["label"], columns["prediction"]
        full = {"idx": columns["idx"], "label": label, "prediction": prediction, "label_name": NAMES[label],
                "prediction_name": NAMES[prediction], "accuracy": (label == prediction).astype(float),
                "cross_entropy": columns["loss"]}
        write_epoch_table(os.path.join(run, f"epoch_{number}", EPOCH_TABLE_FILE), full, ROLES)
        with open(os.path.join(run, f"epoch_{number}", "validation_scores.json"), "w") as f:
            json.dump({"aggregated": {}, "per_datapoint": {}}, f)
    return run


def epoch_columns(rng, rows: int) -> dict:
    return {"idx": np.arange(rows), "label": rng.integers(0, 6, rows), "prediction": rng.integers(0, 6, rows),
            "loss": rng.exponential(1.0, rows)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    rng = np.random.default_rng(0)
    folder = str(tmp_path_factory.mktemp("run_diff"))
    first = epoch_columns(rng, 60)
    second = {**epoch_columns(rng, 60), "label": first["label"]}  # the same validation set, another model
    second["prediction"][:20] = first["label"][:20]  # some flips to right for sure
    smaller = {key: values[:45] for key, values in second.items()}
    return (write_run(folder, "a", [first]), write_run(folder, "b", [second, smaller])), (first, second)


def sides(backend, first=("a", "epoch_0"), second=("b", "epoch_0")):
    chosen = []
    for name, key in (first, second):
        run = next(run for path, run in backend.discovery.runs.items() if path.endswith(f"/{name}"))
        chosen.append(Side(run, backend.epoch(run, key)))
    return chosen


def test_each_datapoint_s_change_and_the_summary_match_a_count_made_here(runs):
    (run_a, _), (first, second) = runs
    backend = ViewerBackend([os.path.dirname(run_a)])
    diff = RunDiffs(backend).diff(*sides(backend), None)
    right_a, right_b = first["prediction"] == first["label"], second["prediction"] == second["label"]
    expected = {RIGHT_TO_WRONG: int((right_a & ~right_b).sum()), WRONG_TO_RIGHT: int((~right_a & right_b).sum()),
                "right in both": int((right_a & right_b).sum()), "wrong in both": int((~right_a & ~right_b).sum())}
    assert diff.metric == "cross_entropy" and diff.counts == expected and expected[WRONG_TO_RIGHT] > 0
    assert diff.summary().startswith(f"{expected[RIGHT_TO_WRONG]} flipped to wrong, {expected[WRONG_TO_RIGHT]} to "
                                     "right")
    delta = second["loss"] - first["loss"]
    assert f"mean Δcross_entropy {delta.mean():+.4g}" in diff.summary()

    request = {"startRow": 0, "endRow": 100, "sortModel": [{"colId": "delta", "sort": "desc"}],
               "filterModel": {"change": {"filterType": "text", "type": "contains", "filter": RIGHT_TO_WRONG}}}
    rows, count = diff_rows(diff, request, dict(enumerate(NAMES)))
    flipped = np.flatnonzero(right_a & ~right_b)
    assert count == len(flipped) and [row["idx"] for row in rows] == flipped[np.argsort(-delta[flipped])].tolist()
    assert all(row["prediction_a"] == first["prediction"][row["idx"]] for row in rows)
    by_name = {"prediction_b": {"filterType": "text", "type": "contains", "filter": "ring"},
               "delta": {"filterType": "text", "type": "contains", "filter": "> 0"}}
    rows, count = diff_rows(diff, {"startRow": 0, "endRow": 100, "filterModel": by_name}, dict(enumerate(NAMES)))
    wanted = np.flatnonzero((second["prediction"] == 4) & (delta > 0))
    assert count == len(wanted) and sorted(row["idx"] for row in rows) == wanted.tolist()


def test_datapoints_only_one_side_has_and_two_epochs_of_one_run(runs):
    (run_a, _), (first, second) = runs
    backend = ViewerBackend([os.path.dirname(run_a)])
    diffs = RunDiffs(backend)
    diff = diffs.diff(*sides(backend, ("a", "epoch_0"), ("b", "epoch_1")), "accuracy")
    assert diff.metric == "accuracy" and diff.counts["only in first"] == 15
    assert "15 only in first" in diff.summary()
    epochs = diffs.diff(*sides(backend, ("b", "epoch_1"), ("b", "epoch_0")), None)
    assert epochs.counts["only in second"] == 15 and sum(epochs.counts.values()) == 60
    assert not os.listdir(diffs._folder), "the joined tables' files are unlinked once open"


def test_a_side_without_labels_is_refused_saying_what_it_needs(runs):
    (run_a, _), _ = runs
    run = write_run(os.path.dirname(run_a), "scores_only", [epoch_columns(np.random.default_rng(1), 10)])
    os.remove(os.path.join(run, "epoch_0", EPOCH_TABLE_FILE))
    with open(os.path.join(run, "epoch_0", "validation_scores.json"), "w") as f:
        json.dump({"aggregated": {"cross_entropy": 1.0}, "per_datapoint": {"cross_entropy": [1.0] * 10},
                   "datapoint_idx": list(range(10)), "higher_is_better": {"cross_entropy": False}}, f)
    backend = ViewerBackend([os.path.dirname(run_a)])
    with pytest.raises(RunDiffError, match="no label or prediction column: run against run needs each side's labels"):
        RunDiffs(backend).diff(*sides(backend, ("scores_only", "epoch_0"), ("a", "epoch_0")), None)


@pytest.mark.parametrize("request_, message", [
    ({"startRow": "0", "endRow": 100}, "startRow '0', not a row number"),
    ({"startRow": 0, "endRow": 10**30}, "endRow 1000000000000000000000000000000, not a row number"),
    ({"startRow": -5, "endRow": 10}, "startRow -5, not a row number"),
    ({"startRow": 0, "endRow": 10, "sortModel": {"colId": "delta"}}, "sort model is not a list"),
    ({"startRow": 0, "endRow": 10, "sortModel": ["delta"]}, "sort model is not a list"),
    ({"startRow": 0, "endRow": 10, "filterModel": ["idx"]}, "filter model is not an object"),
    ({"startRow": 0, "endRow": 10, "filterModel": {"idx": "1"}}, "filter model is not an object"),
    ({"startRow": 0, "endRow": 10, "filterModel": {"delta": {"filterType": "text", "filter": "abc"}}},
     "'abc' is not a number"),
    (["not", "a", "request"], "not an object"),
])
def test_a_malformed_rows_request_is_answered_with_a_message(runs, request_, message):
    (run_a, _), _ = runs
    backend = ViewerBackend([os.path.dirname(run_a)])
    diff = RunDiffs(backend).diff(*sides(backend), None)
    with pytest.raises(BadRequest, match=message):
        diff_rows(diff, request_, {})


@pytest.mark.parametrize("filter_model", [
    {'idx" OR 1=1 --': {"filterType": "text", "type": "contains", "filter": "1"}},
    {"change": {"filterType": "text", "type": "contains", "filter": "x' OR '1'='1"}},
    {"score_a": {"filterType": "text", "type": "contains", "filter": "< 1; DROP TABLE side_a"}},
])
def test_hostile_filters_never_become_sql(runs, filter_model):
    (run_a, _), _ = runs
    backend = ViewerBackend([os.path.dirname(run_a)])
    diff = RunDiffs(backend).diff(*sides(backend), None)
    try:
        rows, count = diff_rows(diff, {"startRow": 0, "endRow": 100, "filterModel": filter_model}, {})
    except (EpochTableError, BadRequest) as exc:  # a column the joined table lacks, a value that is no number
        assert "no column" in str(exc) or "is not a number" in str(exc)
    else:
        assert rows == [] and count == 0  # the text is a value compared, never SQL run
    assert diff.table.count() == 60
