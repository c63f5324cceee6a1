"""The held-out replication on a real epoch table: a planted slice and a planted separating quantity replicate, a
column of pure noise does not, and half B's numbers are those of an independent count."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import fisher_exact

from analysis.epoch_table import EpochTable, write_epoch_table
from analysis.failures import FailureDefinition
from analysis.finding_plans import RunFacts, plan_for_finding
from analysis.findings import Condition
from analysis.intervention import failure_rule
from analysis.replication import NOT_REPLICATED, REPLICATED, SEPARATOR, SLICE, SUBGROUP, HeldOut, ReplicationPlan

N = 1200


@pytest.fixture(scope="module")
def held_out(tmp_path_factory):
    """1,200 datapoints: site C fails 60% (10% elsewhere), failures elsewhere have a higher 'exposure'; 'lot' is
    noise."""
    rng = np.random.default_rng(0)
    site = rng.choice(["A", "B", "C"], N)
    wrong = rng.random(N) < np.where(site == "C", 0.6, 0.1)
    label = rng.integers(0, 3, N)
    columns = {"idx": np.arange(N), "label": label, "prediction": np.where(wrong, (label + 1) % 3, label),
               "site": site, "exposure": rng.normal(size=N) + 3 * wrong * (site != "C"),
               "lot": rng.choice(["x", "y", "z", "w"], N)}
    path = str(tmp_path_factory.mktemp("replication") / "epoch_table.parquet")
    write_epoch_table(path, columns, {"meta": ["site", "exposure", "lot"]})
    table = EpochTable(path)
    _, failed = failure_rule(table, FailureDefinition())
    return HeldOut(table, failed, FailureDefinition(), seed=1), columns, failed


def test_a_planted_slice_is_found_on_half_a_and_holds_on_half_b(held_out):
    halves, columns, failed = held_out
    result = halves.replicate(ReplicationPlan("meta.slices-0", "site = C", [], SLICE, "meta",
                                              [Condition("site", "=", "C")]))
    assert result.verdict == REPLICATED and result.found_as == "site = C"
    assert sorted(result.halves) == [N // 2, N // 2]
    on_b = ~halves.in_a
    inside = columns["site"] == "C"
    expected = [(int((failed & part & on_b).sum()), int((part & on_b).sum())) for part in (inside, ~inside)]
    assert [result.inside, result.outside] == expected
    (fail_in, size_in), (fail_out, size_out) = expected
    p_value = fisher_exact([[fail_in, size_in - fail_in], [fail_out, size_out - fail_out]], alternative="greater")[1]
    assert result.p_value == pytest.approx(p_value)
    assert not np.isin(np.flatnonzero(halves.in_a), np.flatnonzero(on_b)).any()
    assert abs(int(failed[halves.in_a].sum()) - int(failed[on_b].sum())) <= 1  # failures split evenly


def test_a_separating_quantity_replicates_and_a_noise_slice_does_not(held_out):
    halves, _, _ = held_out
    exposure = halves.replicate(ReplicationPlan("meta.separators-0", "exposure", [], SEPARATOR, "meta",
                                                column="exposure", direction="higher in failures"))
    assert exposure.verdict == REPLICATED and exposure.auroc > 0.6 and exposure.p_value < 0.05
    noise = halves.replicate(ReplicationPlan("meta.slices-1", "lot = x", [], SLICE, "meta",
                                             [Condition("lot", "=", "x")]))
    assert noise.verdict == NOT_REPLICATED and "finds no slice over them" in noise.reason


def test_a_subgroup_is_picked_again_on_half_a_then_tested_on_half_b(held_out):
    halves, columns, failed = held_out
    group = np.flatnonzero(columns["site"] == "C")
    kept = halves.replicate(ReplicationPlan("subgroups-0", "cluster", group.tolist(), SUBGROUP))
    assert kept.verdict == REPLICATED and kept.inside[1] == int((~halves.in_a[group]).sum())
    chance = np.random.default_rng(3).choice(N, 60, replace=False)
    dropped = halves.replicate(ReplicationPlan("subgroups-1", "cluster", chance.tolist(), SUBGROUP))
    assert dropped.verdict == NOT_REPLICATED and "half A would not pick it" in dropped.reason



def test_a_slice_within_a_class_replicates_within_its_class(tmp_path):
    """Dust makes class 0 fail (70% against 15% for the rest of it and for every other class, dusty or not): the
    check of 'dust = True among label = 0', made from the finding as stored, keeps its class among its conditions,
    finds it again on half A and holds on half B (dust alone would restate nothing of the other classes)."""
    rng = np.random.default_rng(2)
    label, dust = rng.integers(0, 3, N), rng.random(N) < 0.3
    wrong = rng.random(N) < np.where(dust & (label == 0), 0.7, 0.15)
    path = str(tmp_path / "epoch_table.parquet")
    write_epoch_table(path, {"idx": np.arange(N), "label": label, "prediction": np.where(wrong, (label + 1) % 3, label),
                             "dust": dust}, {"meta": ["dust"]})
    table = EpochTable(path)
    _, failed = failure_rule(table, FailureDefinition())
    inside = dust & (label == 0)
    finding = {"conditions": [{"column": "dust", "op": "=", "value": True}], "idx": np.flatnonzero(inside).tolist(),
               "label": {"column": "label", "op": "=", "value": 0}, "description": "dust = True among label = 0"}
    plan = plan_for_finding("class_slices-0", finding, RunFacts(np.arange(N), failed, frozenset(), {},
                                                                lambda column: None))
    assert isinstance(plan, ReplicationPlan) and [c.column for c in plan.conditions] == ["dust", "label"]
    result = HeldOut(table, failed, FailureDefinition(), seed=1).replicate(plan)
    assert result.verdict == REPLICATED, result.describe()
    on_b = ~HeldOut(table, failed, FailureDefinition(), seed=1).in_a
    assert [result.inside, result.outside] == [(int((failed & part & on_b).sum()), int((part & on_b).sum()))
                                               for part in (inside, ~inside)]
