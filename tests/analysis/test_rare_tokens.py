"""The share of rare tokens, derived from a run's captured token inputs (``analysis/rare_tokens.py``): its values
against a count of its own, padding told by the mask or by the trailing id, never for float inputs; a group of
messages holding rare tokens that fail more is the inputs' first slice, its datapoints leave the label suspects,
the report says what the column means, and ``--verify``'s held-out replication finds it again.

Inputs are written by the runners' own capture and tables by the real writer; the analysis reads the run folder."""

from __future__ import annotations

import numpy as np

from analysis.epoch_table import EpochTable
from analysis.failures import FailureDefinition, analyze
from analysis.finding_plans import RunFacts, finding_entries, not_offered, plan_for_finding
from analysis.rare_tokens import MEANING, RARE_SHARE, rare_token_columns
from analysis.replication import REPLICATED, SLICE, HeldOut, ReplicationPlan
from analysis.run_columns import run_columns
from runners.analyze import format_findings
from tests.analysis.tables import capture_inputs, classified, probabilities_of, token_inputs, write_table

ROWS = 2000
COLUMN = "input:rare_token_share"


def counted_shares(tokens: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The share of rare tokens counted by hand: a token's datapoints with a set per datapoint."""
    real = [tokens[row, :size].tolist() for row, size in enumerate(lengths)]
    holders: dict[int, int] = {}
    for row in real:
        for token in set(row):
            holders[token] = holders.get(token, 0) + 1
    most = max(1.0, RARE_SHARE * len(real))
    return np.array([sum(holders[t] <= most for t in row) / len(row) for row in real])


def rare_run(folder, failing_rare: float, seed: int = 0) -> np.ndarray:
    """An evaluator-like folder of ROWS messages, 5% holding rare tokens, which fail ``failing_rare`` against 15%
    for the others; no table column says which they are. Returns the rare rows (a bool mask)."""
    rng = np.random.default_rng(seed)
    rare = rng.random(ROWS) < 0.05
    tokens, mask = token_inputs(rng, ROWS, rare)
    capture_inputs(folder, {"tokens": tokens, "attention_mask": mask})
    failed = rng.random(ROWS) < np.where(rare, failing_rare, 0.15)
    columns = classified(rng, failed) | {"length": mask.sum(axis=1).astype(np.float64)}
    columns["probabilities"], columns["logsumexp"] = probabilities_of(rng, columns["label"], columns["prediction"],
                                                                      4, rng.uniform(1, 4, ROWS))
    write_table(folder / "epoch_table.parquet", columns, meta=["length"], scores={"accuracy": True})
    return rare


def test_the_share_is_counted_over_real_tokens_by_the_mask_or_the_trailing_padding(tmp_path):
    rng = np.random.default_rng(1)
    tokens, mask = token_inputs(rng, 400, rng.random(400) < 0.1)
    expected = counted_shares(tokens, mask.sum(axis=1))
    idx = np.arange(400)
    (tmp_path / "masked").mkdir()
    capture_inputs(tmp_path / "masked", {"tokens": tokens, "attention_mask": mask})
    masked, note = rare_token_columns(str(tmp_path / "masked"), idx)
    np.testing.assert_allclose(masked[COLUMN], expected)
    assert note is None and expected.max() > 0
    (tmp_path / "unmasked").mkdir()
    capture_inputs(tmp_path / "unmasked", {"input_ids": tokens})
    np.testing.assert_allclose(rare_token_columns(str(tmp_path / "unmasked"), idx)[0][COLUMN], expected)
    missing = rare_token_columns(str(tmp_path / "masked"), np.array([0, 5000]))[0][COLUMN]
    assert missing[0] == expected[0] and np.isnan(missing[1])  # a datapoint the run did not capture


def test_float_inputs_integer_points_and_runs_without_a_capture_give_no_column(tmp_path):
    rng = np.random.default_rng(2)
    capture_inputs(tmp_path, {"image": rng.random((50, 3, 8, 8)).astype(np.float32),
                              "signal": rng.random((50, 64)).astype(np.float32),
                              "point": rng.integers(0, 224, (50, 2)), "box": rng.integers(0, 224, (50, 4))})
    assert rare_token_columns(str(tmp_path), np.arange(50)) == ({}, None)
    (tmp_path / "bare").mkdir()
    assert rare_token_columns(str(tmp_path / "bare"), np.arange(50)) == ({}, None)


def test_messages_with_rare_tokens_that_fail_more_are_the_inputs_first_slice_explained_in_the_report(tmp_path):
    rare = rare_run(tmp_path, failing_rare=0.8)
    findings = analyze(str(tmp_path))
    top = findings.inputs.slices[0]
    assert [(c.column, c.op) for c in top.conditions] == [(COLUMN, ">=")] and top.conditions[0].value > 0
    assert set(top.idx.tolist()) == set(np.flatnonzero(rare).tolist())  # the cut starts at the first rare token
    assert findings.meta.slices == []  # no table column says it
    assert not set(findings.label_issues[i].idx for i in range(len(findings.label_issues))) & set(top.idx.tolist())
    assert MEANING in findings.notes
    report = format_findings(findings)
    assert "Inputs (what the captured inputs hold): slices" in report and MEANING in report
    assert "inputs.slices-0" in dict(finding_entries(findings.to_dict()))


def test_verify_replicates_the_rare_token_slice_on_held_out_datapoints(tmp_path):
    """No intervention on the model applies to a column of the inputs: ``--verify`` plans a held-out replication,
    whose halves get the column as the analysis read it, and half A finds the slice again."""
    rare_run(tmp_path, failing_rare=0.8)
    findings = analyze(str(tmp_path))
    table = EpochTable(str(tmp_path / "epoch_table.parquet"))
    values = table.values(["idx", "label", "prediction"])
    failed = values["label"] != values["prediction"]
    key, finding = next(entry for entry in finding_entries(findings.to_dict()) if entry[0] == "inputs.slices-0")
    assert not_offered(key, table.roles) is None  # the Failures tab offers its verify button
    plan = plan_for_finding(key, finding, RunFacts(values["idx"], failed, frozenset(), {}, lambda name: None))
    assert isinstance(plan, ReplicationPlan) and (plan.kind, plan.family) == (SLICE, "inputs")
    held_out = HeldOut(table, failed, FailureDefinition(), 0, run_columns(str(tmp_path), values["idx"])[0])
    result = held_out.replicate(plan)
    assert result.verdict == REPLICATED, result.reason
    assert result.found_as.startswith(f"{COLUMN} >= ")


def test_an_image_run_reports_no_inputs_family(tmp_path):
    rng = np.random.default_rng(3)
    failed = rng.random(300) < 0.2
    capture_inputs(tmp_path, {"image": rng.random((300, 3, 8, 8)).astype(np.float32)})
    write_table(tmp_path / "epoch_table.parquet", classified(rng, failed) | {"x": rng.normal(size=300)}, ["x"],
                {"accuracy": True})
    findings = analyze(str(tmp_path))
    assert findings.inputs.slices == [] and findings.inputs.no_slice is None and findings.inputs.separators_tested == 0
    assert "Inputs" not in format_findings(findings)
