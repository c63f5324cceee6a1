"""Subgroups: groups of datapoints that lie together in a captured feature space and fail far more are found, the
rare one that only its inputs mark too, and each is described in meta terms (or "no meta column describes it").

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


def write_run(folder, columns: dict[str, np.ndarray], meta: list[str], vectors: np.ndarray) -> str:
    write_epoch_table(str(folder / "epoch_table.parquet"), columns,
                      {"scores": ["accuracy"], "higher_is_better": {"accuracy": True}, "meta": meta})
    with PageWriter(1 << 20) as writer:
        writer.start_epoch(str(folder / "debugger"))
        for i in range(len(vectors)):
            writer.add(i, {"pooled": vectors[i]})
        writer.flush()
    return str(folder)


def classified(rng: np.random.Generator, failed: np.ndarray) -> dict[str, np.ndarray]:
    label = rng.integers(0, 3, len(failed))
    return {"idx": np.arange(len(failed)), "label": label, "prediction": np.where(failed, (label + 1) % 3, label),
            "accuracy": (~failed).astype(float)}


@pytest.fixture(scope="module")
def clustered_run(tmp_path_factory):
    """A sixth of the datapoints are 'blurred': their vectors lie in a blob of their own and 85% of them fail; the
    others lie in two blobs and fail 8% of the time. Every blurred datapoint was taken at site C, which also took
    twice as many others; ``noise`` characterises nothing."""
    rng = np.random.default_rng(0)
    blurred = rng.random(ROWS) < 1 / 6
    other_blob = rng.random(ROWS) < 0.5
    centres = rng.normal(0, 4, size=(3, DIM))
    which = np.where(blurred, 0, np.where(other_blob, 1, 2))
    vectors = (centres[which] + rng.normal(0, 0.5, size=(ROWS, DIM))).astype(np.float32)
    failed = rng.random(ROWS) < np.where(blurred, 0.85, 0.08)
    site = np.where(blurred | (rng.random(ROWS) < 0.4), "C", rng.choice(["A", "B", "D"], ROWS)).astype(object)
    columns = classified(rng, failed) | {"site": site, "noise": rng.random(ROWS)}
    folder = write_run(tmp_path_factory.mktemp("embedding_run"), columns, ["site", "noise"], vectors)
    return folder, blurred, failed, site


def test_a_failing_group_of_a_feature_space_is_found_and_described_by_its_meta_column(clustered_run):
    """The blob is a subgroup, "100% have site = C (n% of those are in it)": its coverage and purity are measured
    on its own rows; site C, which fails more for the blob's sake, is the meta slice."""
    folder, blurred, failed, site = clustered_run
    findings = analyze(folder)
    assert findings.subgroups and all(g.debugger == "pooled" for g in findings.subgroups)
    assert all(g.description in format_findings(findings) for g in findings.subgroups)
    top = findings.subgroups[0]
    members = np.zeros(ROWS, dtype=bool)
    members[top.idx] = True
    assert top.size == members.sum() and top.failures == (members & failed).sum()
    assert top.failure_rate == pytest.approx(failed[members].mean())
    assert top.rest_failure_rate == pytest.approx(failed[~members].mean())
    assert adjusted_rand_score(blurred, members) > 0.9  # the subgroup is the planted group
    assert set(top.examples) <= set(top.idx[failed[top.idx]].tolist()) and len(top.examples) == 5
    (condition,) = top.meta_match.conditions
    assert (condition.column, condition.op, condition.value) == ("site", "=", "C")
    at_c = site == "C"
    assert top.meta_match.coverage == pytest.approx((members & at_c).sum() / members.sum())
    assert top.meta_match.purity == pytest.approx((members & at_c).sum() / at_c.sum())
    assert top.description.startswith(f"{top.meta_match.coverage:.0%} have site = C")
    assert top.target.debugger == "pooled" and top.target.conditions == top.meta_match.conditions
    assert [s.description for s in findings.meta.slices] == ["site = C"]


def test_a_rare_group_only_its_inputs_mark_is_found_with_no_meta_description(tmp_path):
    """1.5% of the datapoints (a scanner artifact, no meta column) lie apart in the feature space and fail 85%;
    the rest, in four broad blobs, fail 10%. k-means with a few clusters splits the blobs; HDBSCAN isolates it."""
    rng = np.random.default_rng(7)
    rows = 2000
    rare = np.zeros(rows, dtype=bool)
    rare[rng.choice(rows, 30, replace=False)] = True
    centres = rng.normal(0, 3, size=(5, DIM))
    which = np.where(rare, 4, rng.integers(0, 4, rows))
    vectors = (centres[which] + rng.normal(0, np.where(rare, 0.3, 1.0)[:, None], size=(rows, DIM)))
    failed = rng.random(rows) < np.where(rare, 0.85, 0.1)
    meta = {"site": rng.choice(["a", "b", "c"], rows).astype(object), "dose": rng.random(rows)}
    findings = analyze(write_run(tmp_path, classified(rng, failed) | meta, list(meta), vectors.astype(np.float32)))
    found = [g for g in findings.subgroups if np.isin(g.idx, np.flatnonzero(rare)).mean() > 0.8]
    assert len(found) == 1, [(g.size, g.failure_rate) for g in findings.subgroups]
    (group,) = found
    assert np.isin(np.flatnonzero(rare), group.idx).mean() > 0.8
    assert group.meta_match is None and group.description == "no meta column describes it"
    assert all(rare[i] for i in group.examples)
    assert not findings.meta.slices  # nothing in the meta info says it


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


def test_a_space_holding_only_failing_datapoints_says_why_it_gives_no_subgroups(clustered_run, tmp_path):
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
    assert findings.subgroups == []
    assert any("no subgroups in 'pooled'" in note and "keep='failing'" in note for note in findings.notes)
