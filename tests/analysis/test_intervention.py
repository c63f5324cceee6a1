"""The pure parts of ``--verify``: matched control, failure rule, statistics and verdicts, and the adapter from a
finding's dict to a plan (no model: tests/runners/test_verify.py reruns a real one)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import beta

from analysis.epoch_table import FAILURE_DEFINITION_ROLE, EpochTable, write_epoch_table
from analysis.failures import FailureDefinition
from analysis.finding_plans import (
    NOT_VERIFIABLE,
    RunFacts,
    failure_side,
    finding_entries,
    not_offered,
    plan_for_finding,
    separating_units,
)
from analysis.intervention import (
    CONFIRMED,
    CORRELATIONAL,
    HEADS,
    INCONCLUSIVE,
    REFERENCE_SIZE,
    InputMask,
    InterventionPlan,
    NotVerifiable,
    OutcomeCounts,
    PromptMove,
    UnitPatch,
    UnitShift,
    compare,
    control_size,
    failure_rule,
    matched_control,
    passing_reference,
)
from analysis.replication import SEPARATOR, SLICE, SUBGROUP, ReplicationPlan


def test_the_control_matches_the_findings_failing_and_passing_counts_from_outside_it():
    rng = np.random.default_rng(0)
    idx = np.arange(1000)
    failed = rng.random(1000) < 0.2
    finding = np.arange(0, 200, 2)
    control = matched_control(idx, failed, finding, np.random.default_rng(1))
    assert not np.isin(control, finding).any() and len(np.unique(control)) == len(control)
    assert failed[control].sum() == failed[finding].sum()
    assert (~failed[control]).sum() == (~failed[finding]).sum()
    reference = passing_reference(idx, failed, finding, control, np.random.default_rng(2), size=20)
    assert len(reference) == 20 and not failed[reference].any() and not np.isin(reference, finding).any()
    assert np.isin(reference, control).all()  # the control's passing datapoints first: they are loaded anyway


def test_a_smaller_control_keeps_the_finding_s_shares_and_pays_for_the_reference():
    """A 200-datapoint finding: a control of 168 and a reference of 32 rerun as many datapoints as the finding."""
    rng = np.random.default_rng(0)
    idx = np.arange(2000)
    failed = rng.random(2000) < 0.3
    finding = np.flatnonzero(failed)[:150].tolist() + np.flatnonzero(~failed)[:50].tolist()
    assert control_size(len(finding)) == 200 - REFERENCE_SIZE and control_size(40) == 40
    control = matched_control(idx, failed, np.array(finding), np.random.default_rng(1), control_size(len(finding)))
    assert len(control) == 168 and failed[control].sum() == 126  # 150 of 200 failing: 126 of 168
    assert not np.isin(control, finding).any()


def test_a_control_takes_what_there_is_when_outside_holds_fewer():
    idx = np.arange(30)
    failed = np.zeros(30, dtype=bool)
    failed[:12] = True  # 12 failures, 10 of them in the finding: 2 left outside
    finding = np.arange(10)
    control = matched_control(idx, failed, finding, np.random.default_rng(0))
    assert sorted(control[failed[control]]) == [10, 11]
    few = passing_reference(idx, failed, np.arange(25), control, np.random.default_rng(0), size=64)
    assert sorted(few) == list(range(25, 30))


def test_outcome_counts_and_the_change_in_failure_rate():
    before = np.array([0, 0, 1, 1, 1, 0], dtype=bool)
    after = np.array([0, 1, 0, 0, 1, 0], dtype=bool)
    counts = OutcomeCounts.of(before, after)
    assert (counts.stayed_passing, counts.broken, counts.fixed, counts.stayed_failing) == (2, 1, 2, 1)
    assert (counts.failures_before, counts.failures_after, counts.size) == (3, 2, 6)
    assert counts.change == pytest.approx((2 - 3) / 6)


def test_verdicts_at_the_clear_cases():
    removed = OutcomeCounts(10, 0, 80, 10)  # 80 of 90 failures gone
    untouched = OutcomeCounts(10, 0, 0, 90)
    assert compare(removed, untouched).verdict == CONFIRMED
    assert compare(untouched, untouched).verdict == CORRELATIONAL
    # a patch that removes as many failures anywhere (it wipes the layer out) confirms nothing
    assert compare(OutcomeCounts(100, 0, 800, 100), OutcomeCounts(100, 0, 790, 110)).verdict == CORRELATIONAL
    assert compare(removed, OutcomeCounts(10, 0, 78, 12)).verdict == INCONCLUSIVE  # at 100: 10 points not excluded
    assert compare(OutcomeCounts(0, 0, 3, 3), OutcomeCounts(0, 0, 1, 5)).verdict == INCONCLUSIVE  # 6 datapoints


def test_a_small_sure_effect_on_a_large_finding_leaves_its_failures_in_place():
    """2,000 datapoints, 1,000 failing; the patch fixes 60 of them and none of the control's: a sure effect, but
    3 points of failure rate (94% of the failures stay), within the 10 points under which the verdict is
    'leaves the finding's failures in place'. Both rules hold; the one that says how much is removed wins."""
    comparison = compare(OutcomeCounts(1000, 0, 60, 940), OutcomeCounts(1000, 0, 0, 1000))
    assert comparison.finding_interval.high < 0 and comparison.effect_interval.high < 0
    assert comparison.verdict == CORRELATIONAL, comparison


def test_extreme_counts_keep_an_honest_interval():
    """39 of 39 fixed: a plain bootstrap says [-1, -1]; the posterior of the share fixed leaves room for a few that
    stay, as the exact Clopper-Pearson interval of 39/39 does (the share fixed may be as low as 0.91)."""
    comparison = compare(OutcomeCounts(0, 0, 39, 0), OutcomeCounts(0, 0, 0, 39))
    assert comparison.finding.change == -1.0
    clopper_pearson_low = beta.ppf(0.025, 39, 1)
    assert comparison.finding_interval.low < comparison.finding_interval.high < -0.8
    assert comparison.finding_interval.high == pytest.approx(-clopper_pearson_low, abs=0.01)


def test_the_effect_interval_covers_no_effect_about_95_percent_of_the_time():
    """Coverage checked by simulation: finding and control drawn from the same cell probabilities (no effect)."""
    rng = np.random.default_rng(7)
    cells = [0.5, 0.05, 0.15, 0.3]  # pass→pass, pass→fail, fail→pass, fail→fail
    runs = 300
    covered = 0
    for seed in range(runs):
        finding, control = (OutcomeCounts(*rng.multinomial(60, cells)) for _ in range(2))
        interval = compare(finding, control, seed=seed).effect_interval
        covered += interval.low <= 0 <= interval.high
    assert 0.92 <= covered / runs <= 0.99, covered / runs


def test_a_patch_that_fixes_any_failure_is_not_confirmed_when_few_failures_lie_outside_the_finding():
    """The usual finding holds most of the epoch's failures, so the matched control gets fewer failing datapoints
    than the finding (all there are outside). A patch that fixes half of any failures, wherever they are, then
    lowers the finding's failure rate more than the control's only because the finding holds more failures: that
    is no evidence about the finding, and must not read as confirmed (simulated: 80 failing and 20 passing in
    the finding, 3 failing and 20 passing in the control)."""
    rng = np.random.default_rng(11)
    verdicts = []
    for seed in range(200):
        fixed_finding, fixed_control = rng.binomial(80, 0.5), rng.binomial(3, 0.5)
        finding = OutcomeCounts(20, 0, fixed_finding, 80 - fixed_finding)
        control = OutcomeCounts(20, 0, fixed_control, 3 - fixed_control)
        verdicts.append(compare(finding, control, seed=seed).verdict)
    assert verdicts.count(CONFIRMED) <= 10, verdicts.count(CONFIRMED)


def test_a_patch_that_fixes_the_findings_failures_alone_is_confirmed_with_few_failures_outside():
    confirmed = compare(OutcomeCounts(20, 0, 70, 10), OutcomeCounts(20, 0, 0, 12))
    assert confirmed.verdict == CONFIRMED, confirmed


@pytest.fixture
def table(tmp_path):
    rng = np.random.default_rng(3)
    n = 200
    label = rng.integers(0, 3, n).astype(np.int64)
    prediction = np.where(rng.random(n) < 0.7, label, (label + 1) % 3).astype(np.float64)
    prediction[:4] = np.nan  # no prediction: a failure
    cross_entropy = rng.exponential(1.0, n)
    cross_entropy[5:9] = np.nan
    columns = {"idx": np.arange(n, dtype=np.int64), "label": label, "prediction": prediction,
               "accuracy": (prediction == label).astype(np.float64), "cross_entropy": cross_entropy,
               "energy.c3": rng.random(n), "stats.sparsity": rng.random(n), "site": rng.choice(["A", "B"], n)}
    roles = {"scores": ["accuracy", "cross_entropy"], "higher_is_better": {"accuracy": True, "cross_entropy": False},
             "meta": ["site"], "summaries": ["energy.c3", "stats.sparsity"]}
    path = str(tmp_path / "epoch_table.parquet")
    write_epoch_table(path, columns, roles)
    return EpochTable(path), columns


@pytest.mark.parametrize("definition", [FailureDefinition(), FailureDefinition("cross_entropy", 0.2),
                                        FailureDefinition("accuracy", 0.1)])
def test_the_failure_rule_judges_the_tables_own_rows_as_the_analysis_does(table, definition):
    table, columns = table
    rule, failed = failure_rule(table, definition)
    expected, _ = definition.failed(table, {k: columns[k] for k in ("label", "prediction")})
    assert np.array_equal(failed, expected)
    again = rule.failed({k: columns[k] for k in ("accuracy", "cross_entropy")}, columns["label"], columns["prediction"])
    assert np.array_equal(again, expected)


def facts(n: int = 100, cam_region=None) -> RunFacts:
    rng = np.random.default_rng(0)
    values = {"energy.c7": rng.random(n), "energy.c8": rng.random(n), "stats.sparsity": rng.random(n)}
    failed = values["energy.c7"] > 0.7
    return RunFacts(np.arange(n), failed, frozenset({"energy.c7", "energy.c8", "stats.sparsity", "gradcam.entropy"}),
                    {"energy": "backbone.layer3", "stats": "backbone.layer3", "gradcam": "backbone.layer4"},
                    values.__getitem__, cam_region)


def test_unit_columns_of_a_finding_become_a_patch_of_those_units():
    slice_ = {"conditions": [{"column": "site", "op": "=", "value": "C"}, {"column": "energy.c7", "op": ">=",
                                                                           "value": 0.5}],
              "idx": [1, 2, 3], "description": "site = C and energy.c7 >= 0.5"}
    plan = plan_for_finding("slices-0", slice_, facts())
    assert isinstance(plan, InterventionPlan) and plan.idx == [1, 2, 3]
    assert plan.intervention == UnitPatch("backbone.layer3", (7,))
    family = plan_for_finding("families-0", {"units": ["energy.c8", "energy.c7"], "idx": [4]}, facts())
    assert family.intervention == UnitPatch("backbone.layer3", (7, 8))
    null = plan_for_finding("slices-1", {"conditions": [{"column": "energy.c8", "op": "is null", "value": None}],
                                         "idx": [5]}, facts())
    assert null.intervention == UnitPatch("backbone.layer3", None, nonfinite_only=True)
    nan = plan_for_finding("nan_origins-0", {"module": "backbone.layer2.overflow", "idx": [6, 7]}, facts())
    assert nan.intervention == UnitPatch("backbone.layer2.overflow", None, nonfinite_only=True)


def test_a_separating_quantity_stands_for_the_rows_beyond_90_percent_of_the_passing_ones():
    run = facts()
    plan = plan_for_finding("separators-0", {"column": "energy.c7", "auroc": 1.0, "direction": "higher in failures"},
                            run)
    values = run.column("energy.c7")
    cut = np.quantile(values[~run.failed], 0.9)
    assert plan.idx == np.flatnonzero(values > cut).tolist()
    assert set(plan.idx) >= set(np.flatnonzero(run.failed))  # every failure here lies beyond the passing rows
    lower = failure_side(np.arange(4), np.array([0.0, 1, 2, np.nan]), np.array([0, 0, 1, 1], bool),
                         "lower in failures", share=0.5)
    assert lower.tolist() == [0]


def test_findings_that_name_no_unit_take_the_cam_region_then_a_replication_or_say_why_not():
    statistic = {"column": "stats.sparsity", "direction": "higher in failures", "auroc": 0.8}
    no_cam = plan_for_finding("separators-1", statistic, facts())
    assert isinstance(no_cam, ReplicationPlan) and (no_cam.kind, no_cam.column) == (SEPARATOR, "stats.sparsity")
    group = plan_for_finding("suspect_groups-0", {"description": "site = C", "idx": [70, 71, 5]}, facts())
    assert isinstance(group, NotVerifiable) and "GradCAMDebugger" in group.reason
    region = np.zeros((8, 8), bool)
    region[:2, :2] = True
    seen = {}

    def cam_region(failing, passing):
        seen.update(failing=failing, passing=passing)
        return InputMask("image", region), ""
    plan = plan_for_finding("slices-2", {"description": "site = C", "idx": [70, 71, 5]}, facts(cam_region=cam_region))
    assert plan.intervention.region is region and "Grad-CAM" in plan.why
    assert plan.replication is None and not plan.named  # no conditions: nothing to replicate
    run = facts()
    assert set(seen["failing"]) == {i for i in (70, 71, 5) if run.failed[i]}
    assert not run.failed[seen["passing"]].any() and not np.isin(seen["passing"], [70, 71, 5]).any()
    gradcam_summary = plan_for_finding("separators-2", {"column": "gradcam.entropy", "direction": "higher in failures",
                                                        "idx": [1]}, facts(cam_region=cam_region))
    assert isinstance(gradcam_summary.intervention, InputMask)  # a cam statistic names no unit of the layer
    assert gradcam_summary.replication.kind == SEPARATOR and not gradcam_summary.named  # its verdict, if unconfirmed


def test_a_meta_slice_is_replicated_and_a_prompted_segmentation_moves_its_prompt_first():
    finding = {"conditions": [{"column": "site", "op": "=", "value": "C"}, {"column": "size", "op": ">=",
                                                                           "value": 3.5}], "idx": [1, 2, 3]}
    plan = plan_for_finding("meta.slices-0", finding, facts())
    assert isinstance(plan, ReplicationPlan) and (plan.kind, plan.family) == (SLICE, "meta")
    assert [(c.column, c.op, c.value) for c in plan.conditions] == [("site", "=", "C"), ("size", ">=", 3.5)]
    prompted = RunFacts(**{**vars(facts()), "prompt": PromptMove("point", "mask")})
    moved = plan_for_finding("meta.slices-0", finding, prompted)
    assert moved.intervention == PromptMove("point", "mask") and moved.replication.conditions == plan.conditions


def test_a_family_of_units_is_patched_at_every_unit_that_separates():
    """Eight units; failures raise units 1, 4 and 6 (each alone separates them), the others are noise. The plan
    patches exactly those three, not the one or three a report lists."""
    rng = np.random.default_rng(5)
    n = 400
    failed = rng.random(n) < 0.3
    columns = {f"energy.c{u}": rng.normal(size=n) + (1.5 * failed if u in (1, 4, 6) else 0) for u in range(8)}
    run = RunFacts(np.arange(n), failed, frozenset(columns), {"energy": "backbone.stage2"}, columns.__getitem__)
    assert separating_units("energy.c*", run) == ["energy.c1", "energy.c4", "energy.c6"]
    family = {"column": "energy.c*", "direction": "higher in failures", "units": [{"column": "energy.c4",
                                                                                   "auroc": 0.9}], "family_size": 8}
    plan = plan_for_finding("internals.separators-0", family, run)
    assert plan.intervention == UnitPatch("backbone.stage2", (1, 4, 6)) and "the 3 units of energy.c*" in plan.why
    assert plan.named and plan.replication.kind == SEPARATOR  # the patch's verdict, the replication beside it


def test_an_attention_head_column_names_a_head():
    run = RunFacts(np.arange(4), np.zeros(4, bool), frozenset({"attn.entropy_head3"}), {"attn": "blocks.1.attn"},
                   lambda column: np.arange(4.0))
    plan = plan_for_finding("internals.slices-0", {"conditions": [{"column": "attn.entropy_head3", "op": "<",
                                                                   "value": 1.0}], "idx": [1, 2]}, run)
    assert plan.intervention == UnitPatch("blocks.1.attn", (3,), kind=HEADS)


def test_a_subgroup_is_moved_onto_the_passing_datapoints_along_the_units_that_set_it_apart():
    """A subgroup lies apart in units 0 and 2 of a 5-unit space: those two are shifted by the passing mean minus
    its own; its replication gives the verdict where the shift does not confirm it."""
    rng = np.random.default_rng(2)
    n = 300
    vectors = rng.normal(size=(n, 5))
    members = np.arange(40)
    vectors[members, 0] += 3.0
    vectors[members, 2] -= 2.0
    failed = np.zeros(n, bool)
    failed[members[:30]] = True
    failed[300 - 20:] = True
    run = RunFacts(np.arange(n), failed, frozenset(), {"space": "backbone.stage3"}, lambda column: None,
                   vectors=lambda debugger: (np.arange(n), vectors) if debugger == "space" else None)
    plan = plan_for_finding("subgroups-0", {"debugger": "space", "idx": members.tolist()}, run)
    passing = ~failed & ~np.isin(np.arange(n), members)
    expected = vectors[passing][:, [0, 2]].mean(axis=0) - vectors[members][:, [0, 2]].mean(axis=0)
    assert isinstance(plan.intervention, UnitShift) and plan.intervention.channels == (0, 2)
    np.testing.assert_allclose(plan.intervention.offsets, expected)
    assert plan.replication.kind == SUBGROUP and not plan.named
    unknown = plan_for_finding("subgroups-1", {"debugger": "other", "idx": members.tolist()}, run)
    assert isinstance(unknown, ReplicationPlan)


def test_an_explicit_region_labels_and_dead_units():
    plan = plan_for_finding("groups-0", {"idx": [1], "region": {"input": "image", "box": [2, 3, 5, 7]}}, facts())
    assert plan.intervention.input_key == "image" and plan.intervention.region.sum() == 3 * 4
    assert plan.intervention.region[2:5, 3:7].all()
    for key in ("label_issues-0", "dead_units-0"):
        assert isinstance(plan_for_finding(key, {"idx": 3, "column": "energy.c7", "value": 0.0}, facts()),
                          NotVerifiable)
    empty = plan_for_finding("slices-3", {"idx": [], "conditions": []}, facts())
    assert isinstance(empty, NotVerifiable) and "none of the finding's datapoints" in empty.reason
    flag = plan_for_finding("meta.separators-0", {"column": "stats.sparsity", "direction": "higher in failures",
                                                  "idx": []}, facts())
    assert isinstance(flag, ReplicationPlan)  # no datapoints to patch, a quantity to replicate
    assert [key for key, _ in finding_entries({"slices": [{}, {}], "failures": 3, "nan_origins": [{}]})] == \
        ["slices-0", "slices-1", "nan_origins-0"]


def test_the_runs_own_failure_definition_is_applied_to_a_table_without_labels(tmp_path):
    """A segmentation run: no label or prediction column, failures the worst 15% of IoU as its config names them
    (a query for label and prediction there had no column to select: a DuckDB parser error)."""
    iou = np.random.default_rng(4).random(200)
    path = str(tmp_path / "epoch_table.parquet")
    write_epoch_table(path, {"idx": np.arange(200), "iou": iou},
                      {"scores": ["iou"], "higher_is_better": {"iou": True}, FAILURE_DEFINITION_ROLE:
                       {"metric": "iou", "worst_fraction": 0.15}})
    rule, failed = failure_rule(EpochTable(path), FailureDefinition())
    assert rule.metric == "iou" and failed.sum() == 30 and np.array_equal(failed, iou <= np.sort(iou)[29])
    assert np.array_equal(rule.failed({"iou": iou}, None, None), failed)


def test_which_findings_are_offered_for_verification_without_the_model():
    """Slices, separating quantities, subgroups and NaN origins always have a check (at worst a replication); label
    suspects, dead units and restatements never; a group of label suspects only where Grad-CAM was captured."""
    cam = {"input_region": ["gradcam.centroid_x"]}
    for key in ("meta.slices-0", "internals.separators-3", "subgroups-1", "nan_origins-0"):
        assert not_offered(key, {}) is None
    for key in ("label_issues-0", "dead_units-2", "restatements-0"):
        assert not_offered(key, cam) == NOT_VERIFIABLE[key.rsplit("-", 1)[0]]
    assert "GradCAMDebugger" in not_offered("suspect_groups-0", {}) and not_offered("suspect_groups-0", cam) is None
