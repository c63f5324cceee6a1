"""Embedding slices: failures that form a cluster in a captured feature space are found and described.

The run folder is written with the real writers (the epoch table's and the debug pages' ``PageWriter``);
each datapoint's page entry is a pooled feature vector, as a debugger returning a 1-D array leaves it.
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from analysis.epoch_table import write_epoch_table
from analysis.failures import analyze
from analysis.internals import read_internals
from debuggers.pages.file_format import LOCATION
from debuggers.pages.index import read_index, write_index
from debuggers.pages.writer import PageWriter
from runners.analyze import format_findings

ROWS = 600
DIM = 8


@pytest.fixture(scope="module")
def clustered_run(tmp_path_factory):
    """A quarter of the datapoints are 'blurred': their vectors lie in a blob of their own and 85% of them
    fail; the others lie in two blobs and fail 8% of the time. ``blur`` characterises the group; ``noise``
    characterises nothing."""
    rng = np.random.default_rng(0)
    blurred = rng.random(ROWS) < 0.25
    other_blob = rng.random(ROWS) < 0.5
    centres = rng.normal(0, 4, size=(3, DIM))
    which = np.where(blurred, 0, np.where(other_blob, 1, 2))
    vectors = (centres[which] + rng.normal(0, 0.5, size=(ROWS, DIM))).astype(np.float32)
    failed = rng.random(ROWS) < np.where(blurred, 0.85, 0.08)
    blur = np.where(blurred, rng.uniform(0.6, 1.0, ROWS), rng.uniform(0.0, 0.4, ROWS))
    label = rng.integers(0, 3, ROWS)
    prediction = np.where(failed, (label + 1) % 3, label)
    folder = tmp_path_factory.mktemp("embedding_run")
    write_epoch_table(str(folder / "epoch_table.parquet"), {
        "idx": np.arange(ROWS), "label": label, "prediction": prediction,
        "accuracy": (~failed).astype(float),
        "blur": blur,
        "noise": rng.random(ROWS),
    }, {"scores": ["accuracy"], "higher_is_better": {"accuracy": True}, "meta": ["blur", "noise"]})
    with PageWriter(1 << 20) as writer:
        writer.start_epoch(str(folder / "debugger"))
        for i in range(ROWS):
            writer.add(i, {"pooled": vectors[i]})
        writer.flush()
    return str(folder), blurred, failed, blur


def test_failures_clustered_in_a_captured_space_are_found_and_described(clustered_run):
    folder, blurred, failed, blur = clustered_run
    findings = analyze(folder)
    clusters = findings.clusters
    assert all(cluster.description in format_findings(findings) for cluster in clusters)
    assert clusters and all(cluster.debugger == "pooled" for cluster in clusters)
    top = clusters[0]
    members = np.zeros(ROWS, dtype=bool)
    members[top.idx] = True
    assert top.size == members.sum() and top.failures == (members & failed).sum()
    assert top.failure_rate == pytest.approx(failed[members].mean())
    assert blurred[members].mean() >= 0.95  # the cluster is the planted group ...
    failing = np.zeros(ROWS, dtype=bool)
    for cluster in clusters:
        if cluster.failure_rate > 0.5:
            failing[cluster.idx] = True
    assert adjusted_rand_score(blurred, failing) > 0.9  # ... and the failing clusters together are all of it

    # described first by the column that characterises it: its failures' mean blur against the passes'
    first = top.description.split("; ")[0]
    assert first == f"blur high ({blur[members & failed].mean():.3g} vs {blur[~failed].mean():.3g})"


def test_location_rows_pointing_at_one_record_again_and_again_are_refused(tmp_path):
    """The review's probe (2000 rows at one vector made analysis allocate 26 GB), at 200 rows: what the epoch's
    datapoints hold is counted against the size of their page."""
    folder = tmp_path / "debugger"
    with PageWriter(1 << 20) as writer:
        writer.start_epoch(str(folder))
        for i in range(4):
            writer.add(i, {"pooled": np.full(10_000, i, np.float32)})
        writer.flush()
    assert read_internals(str(tmp_path)).vectors["pooled"][1].shape == (4, 10_000)
    rows = np.repeat(np.fromfile(folder / "locations.bin", LOCATION)[:1], 200)
    rows["idx"] = np.arange(200)  # 200 datapoints, all datapoint 0's record
    rows.tofile(folder / "locations.bin")
    write_index(str(folder / "index.json"), {**read_index(str(folder / "index.json")), "datapoints": 200})
    internals = read_internals(str(tmp_path))  # the epoch's outputs skipped, saying why
    assert not internals.vectors and re.search("locations.bin points datapoints 0 and 1 at one header.*rerun",
                                               str(internals.problem))


def test_a_space_holding_only_failing_datapoints_says_why_it_gives_no_clusters(clustered_run, tmp_path):
    """keep='failing' captures failures only: nothing to tell them from, and the findings say so."""
    folder, _, failed, _ = clustered_run
    only_failing = tmp_path / "failing_only"
    only_failing.mkdir()
    shutil.copy(f"{folder}/epoch_table.parquet", only_failing / "epoch_table.parquet")
    vectors = np.random.default_rng(1).normal(size=(ROWS, DIM)).astype(np.float32)
    with PageWriter(1 << 20) as writer:
        writer.start_epoch(str(only_failing / "debugger"))
        for i in np.flatnonzero(failed):
            writer.add(int(i), {"pooled": vectors[i]})
        writer.flush()
    findings = analyze(str(only_failing))
    assert findings.clusters == []
    assert any("no failure clusters in 'pooled'" in note and "keep='failing'" in note for note in findings.notes)
