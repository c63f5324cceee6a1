"""The failure analysis's statistics: random failures give no finding, a noise condition is never appended to a
real cause, and a score-based failure definition takes what it says (ties and missing scores included).

The tables are written with the real writer and read back; every figure is checked against its definition.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy.stats import hypergeom

from analysis.epoch_table import EpochTable
from analysis.failures import AnalysisError, FailureDefinition, analyze, analyze_table
from analysis.findings import NaNOrigin
from analysis.internals import CapturedInternals
from analysis.slices import fails_more, thresholds
from tests.analysis.tables import capture_inputs, classified, token_inputs, write_table

NULL_SEEDS = 20
NULL_ROWS = 1000


@pytest.mark.parametrize("seed", range(NULL_SEEDS))
def test_random_failures_give_no_slice_no_separating_quantity_and_no_subgroup(tmp_path, seed):
    """30% of the datapoints fail at random; 20 Gaussian columns, 3 categorical ones, a flag and a captured
    feature space carry no information, so every finding would be a false one (a slice within a class too), and the
    report says why no slice is named."""
    rng = np.random.default_rng(seed)
    failed = rng.random(NULL_ROWS) < 0.3
    meta = {f"x{j}": rng.normal(size=NULL_ROWS) for j in range(20)}
    meta |= {f"c{j}": rng.choice(["a", "b", "c", "d"], NULL_ROWS).astype(object) for j in range(3)}
    meta["flag"] = rng.random(NULL_ROWS) < 0.2
    table = write_table(tmp_path / "epoch_table.parquet", classified(rng, failed) | meta, list(meta),
                        {"accuracy": True})
    space = CapturedInternals({"pooled": (np.arange(NULL_ROWS), rng.normal(size=(NULL_ROWS, 8)))}, [])
    findings = analyze_table(table, space)
    assert findings.failures == failed.sum()
    assert findings.meta.slices == [], [s.description for s in findings.meta.slices]
    assert findings.meta.separators == [], [(s.column, s.auroc) for s in findings.meta.separators]
    assert findings.meta.separators_tested == 21  # the 20 Gaussian columns and the flag
    assert findings.subgroups == [], [(g.size, g.failure_rate) for g in findings.subgroups]
    assert findings.restatements == []
    assert findings.class_slices == [], [c.description for c in findings.class_slices]
    assert findings.meta.no_slice is not None and findings.meta.no_slice.p_value >= findings.meta.no_slice.level


@pytest.mark.parametrize("seed", range(NULL_SEEDS))
def test_random_failures_over_token_inputs_give_no_rare_token_slice(tmp_path, seed):
    """Messages of which 5% hold rare tokens, captured as a run captures them; 30% of all fail at random: the share
    of rare tokens carries no information, so a slice or a separating quantity on it would be a false finding, and
    the report says why none is named."""
    rng = np.random.default_rng(seed)
    tokens, mask = token_inputs(rng, NULL_ROWS, rng.random(NULL_ROWS) < 0.05)
    capture_inputs(tmp_path, {"tokens": tokens, "attention_mask": mask})
    write_table(tmp_path / "epoch_table.parquet", classified(rng, rng.random(NULL_ROWS) < 0.3), [],
                {"accuracy": True})
    findings = analyze(str(tmp_path))
    assert findings.inputs.slices == [], [s.description for s in findings.inputs.slices]
    assert findings.inputs.separators == [] and findings.inputs.separators_tested == 1
    assert findings.inputs.no_slice is not None and findings.inputs.no_slice.p_value >= findings.inputs.no_slice.level


def test_a_planted_cause_is_reported_alone_never_with_a_noise_condition(tmp_path):
    """Site C and high blur fail 75%, the rest 8%; ``probe.act`` is a summary shifted by the cause, z0..z7 are
    noise. A conjunction adding a z condition (or trimming a few rows with probe.act) fits noise."""
    rng = np.random.default_rng(42)
    rows = 2000
    site = rng.choice(["A", "B", "C", "D", "E"], rows).astype(object)
    blur = rng.random(rows)
    hard = (site == "C") | (blur >= 0.85)
    failed = rng.random(rows) < np.where(hard, 0.75, 0.08)
    meta = {"site": site, "blur": blur} | {f"z{j}": rng.normal(size=rows) for j in range(8)}
    columns = classified(rng, failed) | meta | {"probe.act": rng.normal(size=rows) + 1.2 * hard}
    findings = analyze_table(write_table(tmp_path / "epoch_table.parquet", columns, list(meta), {"accuracy": True},
                                         ("probe.act",)))
    described = [s.description for s in findings.meta.slices]
    assert described[0] == "site = C", described
    assert described[1].startswith("blur >= 0.") and float(described[1].split()[-1]) >= 0.85, described
    assert not any(c.column.startswith("z") for s in findings.meta.slices for c in s.conditions), described
    for found in findings.meta.slices:
        members = np.isin(np.arange(rows), found.idx)
        assert found.size == members.sum() and found.failure_rate == pytest.approx(failed[members].mean())
        assert found.rest_failure_rate == pytest.approx(failed[~members].mean())
    assert [s.column for s in findings.meta.separators[:1]] == ["blur"]
    assert [s.column for s in findings.internals.separators] == ["probe.act"]
    assert not any(s.column.startswith("z") for s in findings.meta.separators)


def score_table(folder, score: np.ndarray, higher_is_better: bool) -> EpochTable:
    """A table in ``folder`` with idx, one score and a meta column (no labels: failures come from the score)."""
    folder.mkdir(exist_ok=True)
    return write_table(folder / "epoch_table.parquet", {"idx": np.arange(len(score)), "score": score,
                                                          "scale": np.linspace(0, 1, len(score))},
                       ["scale"], {"score": higher_is_better})


def test_tied_scores_never_make_every_datapoint_fail(tmp_path):
    """Accuracy is 0 or 1: with 5% wrong, the worst 10% are those 5% (the 1s tie at the cut and would be all)."""
    accuracy = np.ones(500)
    accuracy[::20] = 0
    table = score_table(tmp_path, accuracy, True)
    findings = analyze_table(table, failure=FailureDefinition("score", 0.1))
    assert findings.failures == 25
    assert "asked, 5.0% fail: score < 1; rows at the cut pass" in findings.failure_definition
    # 40% wrong: the tie at the cut fails together, and the share says so
    accuracy[:200] = 0
    findings = analyze_table(score_table(tmp_path / "b", accuracy, True), failure=FailureDefinition("score", 0.1))
    assert findings.failures == 215 and "43.0% fail: score <= 0;" in findings.failure_definition
    same = analyze_table(score_table(tmp_path / "c", np.ones(500), True), failure=FailureDefinition("score", 0.1))
    assert same.failures == 0 and "score < 1;" in same.failure_definition  # nothing is worse than anything


@pytest.mark.parametrize("higher_is_better", [True, False])
def test_datapoints_without_a_score_fail_first_then_the_worst_scores(tmp_path, higher_is_better):
    rng = np.random.default_rng(1)
    score = rng.exponential(size=1000)
    score[:39] = np.nan
    table = score_table(tmp_path, score, higher_is_better)
    findings = analyze_table(table, failure=FailureDefinition("score", 0.03))
    assert findings.failures == 39 and "3.9% fail: no score" in findings.failure_definition
    findings = analyze_table(table, failure=FailureDefinition("score", 0.1))
    finite = np.sort(score[39:])
    cut = finite[60] if higher_is_better else finite[::-1][60]
    assert findings.failures == 100 and f"{cut:.3g}, or no score" in findings.failure_definition


@pytest.mark.parametrize("metric", ["nope", "scale"])
def test_a_failure_metric_must_be_a_score_column(tmp_path, metric):
    table = score_table(tmp_path, np.arange(100.0), True)
    with pytest.raises(AnalysisError, match=rf"'{metric}' is not a score column of .*score columns: score \(pass one"):
        analyze_table(table, failure=FailureDefinition(metric, 0.1))


def planted_column(kind: str, rng: np.random.Generator, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """A meta column of one kind and where its cause lies (those rows fail 90%, the others 10%)."""
    if kind == "integer id with 30 values":
        column = rng.integers(0, 30, rows)
        return column, column == 17
    if kind == "integers with missing values":
        column = rng.integers(0, 5, rows).astype(np.float64)
        column[::10] = np.nan
        return column, column == 3
    if kind == "flag with missing values":
        flags = rng.random(rows) < 0.3
        column = np.array([bool(f) if i % 10 else None for i, f in enumerate(flags)], dtype=object)
        return column, np.array([v is True for v in column])
    if kind == "missing values":
        column = rng.normal(size=rows)
        column[rng.random(rows) < 0.2] = np.nan
        return column, np.isnan(column)
    column = 1_700_000_000 + rng.integers(0, 86400, rows).astype(np.float64)  # Unix times of one day
    return column, column >= 1_700_000_000 + 64800


@pytest.mark.parametrize("kind, expected", [
    ("integer id with 30 values", r"x = 17"), ("integers with missing values", r"x = 3"),
    ("flag with missing values", r"x = True"), ("missing values", r"x is null"),
    ("Unix times of one day", r"x >= 170006\d{4}")])
def test_a_cause_in_one_column_is_described_by_its_own_value(tmp_path, kind, expected):
    """An integer ID is a category, an integer with NaN too (not ``x >= 3``), a flag with nulls matches True,
    missingness is a condition, and thresholds on large numbers keep the digits that tell rows apart."""
    rng = np.random.default_rng(3)
    column, cause = planted_column(kind, rng, 500)
    failed = rng.random(500) < np.where(cause, 0.9, 0.1)
    table = write_table(tmp_path / "epoch_table.parquet", classified(rng, failed) | {"x": column}, ["x"],
                        {"accuracy": True})
    found = analyze_table(table).meta.slices
    described = [s.description for s in found]
    assert described and re.fullmatch(expected, described[0]), described
    members = np.isin(np.arange(500), found[0].idx)
    assert (members == cause).mean() > 0.95


def test_units_missing_on_the_same_rows_are_one_finding_that_names_the_nan_origin(tmp_path):
    """30 channel summaries are NaN on the same rows (where a layer overflowed: 90% fail); blur >= 0.8 is a
    second, independent cause. The family's 30 identical ``is null`` conditions are one condition, reported once with
    the module where NaN first appeared on those rows; blur is named in the meta family."""
    rng = np.random.default_rng(5)
    rows = 1000
    overflowed, blurred = rng.random(rows) < 0.25, rng.random(rows) >= 0.8
    failed = rng.random(rows) < np.where(overflowed, 0.9, np.where(blurred, 0.6, 0.02))
    summaries = {f"probe.c{j}": np.where(overflowed, np.nan, rng.normal(size=rows)) for j in range(30)}
    meta = {"blur": np.where(blurred, rng.uniform(0.8, 1, rows), rng.uniform(0, 0.8, rows))}
    table = write_table(tmp_path / "epoch_table.parquet", classified(rng, failed) | meta | summaries, list(meta),
                        {"accuracy": True}, tuple(summaries))
    origin = NaNOrigin("backbone.layer2.overflow", "OverflowGate", int(overflowed.sum()),
                       np.flatnonzero(overflowed))
    findings = analyze_table(table, CapturedInternals({}, [origin]))
    internal = findings.internals.slices
    assert [s.description for s in internal] == ["probe.c0 is null (and 29 other units alike)"], internal
    assert internal[0].nan_origin == "backbone.layer2.overflow" and internal[0].target.layer == origin.module
    assert sorted(internal[0].conditions[0].same_on) == sorted(f"probe.c{j}" for j in range(1, 30))
    assert np.array_equal(internal[0].idx, np.flatnonzero(overflowed))
    assert any(re.fullmatch(r"blur >= 0\.[78]\d*", s.description) for s in findings.meta.slices)


def test_the_fisher_test_decides_as_scipys_exact_tail_does():
    """``fails_more`` bounds the hypergeometric tail and sums it exactly only where the bounds straddle the level:
    its decisions are those of ``scipy.stats.hypergeom.sf`` on groups small and large, strong and weak."""
    rng = np.random.default_rng(12)
    size, rest = rng.integers(10, 20_000, 3000), rng.integers(10, 200_000, 3000)
    rate = rng.uniform(0, 0.5, 3000)
    failures = rng.binomial(size, np.minimum(1, rate * rng.uniform(0.5, 3, 3000)))
    rest_failures = rng.binomial(rest, rate)
    alpha = 10 ** rng.uniform(-12, -1, 3000)
    exact = hypergeom.sf(failures - 1, size + rest, failures + rest_failures, size) < alpha
    assert np.array_equal(fails_more(failures, size, rest_failures, rest, alpha), exact)
    assert 0.2 < exact.mean() < 0.8  # both decisions are exercised


def test_a_column_mostly_one_value_is_also_cut_where_the_other_values_start():
    """Every quantile of a column that is 0 on 95% of the rows is 0: no quantile cut parts the rest from the zeros,
    so the first value above them is a cut too; a column with no such mass keeps its quantile cuts alone."""
    mostly_zero = np.concatenate([np.zeros(950), np.linspace(0.04, 0.5, 50)])
    assert thresholds(mostly_zero) == [0.0, 0.04]
    spread = np.linspace(0, 1, 1001)
    assert thresholds(spread) == [0.1, 0.25, 0.5, 0.75, 0.9]
