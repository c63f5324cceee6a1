"""``--verify`` beyond images, each on a small real run: a Conv1d model on signals (tests/runners/burst_signals.py),
the attention model on padded token sequences (tests/runners/sequences_small_config.py) and the promptable segmenter
(tests/runners/segmentation_small_config.py). Each intervention's outcomes are checked against a rerun written out
by hand; every finding offered gets a verdict, resting on an intervention or on a held-out replication."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from scipy.ndimage import distance_transform_edt

from analysis.epoch_table import EpochTable
from analysis.failures import FailureDefinition
from analysis.finding_plans import NOT_VERIFIABLE, finding_entries, plan_for_finding
from analysis.findings import decode_idx
from analysis.intervention import (
    CONFIRMED,
    CORRELATIONAL,
    HEADS,
    PADDING,
    InputMask,
    InterventionPlan,
    OutcomeCounts,
    PromptMove,
    UnitPatch,
    UnitShift,
    failure_rule,
)
from analysis.replication import Replication
from run_dir.names import EPOCH_TABLE_FILE
from runners.verify import Verification, run_facts, verify_findings, verify_plan
from tests.runners.burst_signals import BURST_VALUE, CLAMP, UNIT
from tests.runs import REPO_ROOT
from utils.builders import build_from_config

pytestmark = [pytest.mark.timeout(900), pytest.mark.usefixtures("one_thread"), pytest.mark.slow]
VERDICTS = {"intervention": {"confirmed", "correlational", "inconclusive"},
            "replication": {"replicated", "not replicated"}}


def failures_before(run) -> dict[int, bool]:
    table = EpochTable(os.path.join(run["epoch_dir"], EPOCH_TABLE_FILE))
    _, failed = failure_rule(table, FailureDefinition())
    return dict(zip(table.values(["idx"])["idx"].tolist(), failed.tolist()))


def by_hand(run, result: Verification, forward) -> None:
    """The result's counts equal those of ``forward(inputs, labels, reference_inputs) -> failed`` run by hand on
    the finding and its control."""
    dataset = build_from_config(run["config"]["val_dataset"])
    collate = run["config"]["val_dataloader"]["args"].get("collate_fn")

    def batch(idx):
        return collate([dataset[i] for i in idx])
    rows = sorted(set(result.plan.idx) | set(result.control_idx))
    with torch.no_grad():
        failed = forward(batch(rows), batch(result.reference_idx))
    after = dict(zip(rows, failed.tolist()))
    before = failures_before(run)
    for idx, counts in ((result.plan.idx, result.comparison.finding), (result.control_idx, result.comparison.control)):
        assert counts == OutcomeCounts.of(np.array([before[i] for i in idx]), np.array([after[i] for i in idx]))


def facts_of(run) -> tuple:
    """The run's failure rule, its epoch's failures and the facts a plan is made from."""
    table = EpochTable(os.path.join(run["epoch_dir"], EPOCH_TABLE_FILE))
    rule, failed = failure_rule(table, FailureDefinition())
    return rule, failed, run_facts(table, failed, run["model"], run["epoch_dir"])


def run_plan(run, intervention, idx=None) -> Verification:
    """``intervention`` on ``idx`` (default: 60 failing datapoints) of the run's epoch."""
    rule, failed, facts = facts_of(run)
    idx = facts.table_idx[failed][:60] if idx is None else idx
    return verify_plan(run["model"], InterventionPlan("groups-0", "a finding", [int(i) for i in idx], intervention,
                                                      ""), rule, facts)


def keyed(findings: dict, test) -> str:
    return next(key for key, finding in finding_entries(findings) if test(key, finding))


# ------------------------------------------------------------------------------------------- a Conv1d model
def stage2_units(model, signal: torch.Tensor) -> torch.Tensor:
    """``BurstUnitSignalCNN`` up to its trigger, written out: (B, C, T)."""
    saturated = (signal.abs().amax(dim=1, keepdim=True) > BURST_VALUE / 2).float()
    return model.trigger(model.backbone.stage2(model.backbone.stage1(signal.clamp(-CLAMP, CLAMP))), saturated)


def test_a_conv1d_unit_family_is_confirmed_at_its_extent_and_its_monitor_is_correlational(burst):
    findings = burst["findings"]
    family = keyed(findings, lambda key, f: f.get("column") == "unit_energy.c*")
    monitor = keyed(findings, lambda key, f: f.get("column") == "monitor_energy.c0")
    cause, copy = verify_findings(burst["epoch_dir"], findings, [family, monitor], trust_configs=True)
    assert isinstance(cause.plan.intervention, UnitPatch) and cause.plan.intervention.module == "trigger"
    assert UNIT in cause.plan.intervention.channels and len(cause.plan.intervention.channels) > 3  # every unit
    assert "units of unit_energy.c* that separate" in cause.plan.why
    assert cause.verdict == CONFIRMED, cause.comparison
    assert copy.verdict == CORRELATIONAL, copy.comparison
    model = burst["model"].model
    channels = list(cause.plan.intervention.channels)

    def patched(batch, reference):
        units = stage2_units(model, batch["inputs"]["signal"])
        units[:, channels] = stage2_units(model, reference["inputs"]["signal"]).mean(dim=0)[channels]
        return (model.head(model.backbone.stage3(units)).argmax(dim=1) != batch["labels"]["class"]).numpy()
    by_hand(burst, cause, patched)


def test_a_grad_cam_window_of_the_signal_on_the_burst_is_confirmed(burst):
    [window] = verify_findings(burst["epoch_dir"], {"groups": [{"description": "bursts", "idx": burst["bursts"]}]},
                               trust_configs=True)
    mask = window.plan.intervention
    assert isinstance(mask, InputMask) and mask.region.ndim == 1 and mask.input_key == "signal"
    assert mask.region[96:].all() and not mask.region[:80].any()  # the last quarter, where the bursts lie
    assert window.verdict == CONFIRMED, window.comparison
    model = burst["model"].model
    region = torch.zeros(128, dtype=torch.bool)
    region[:len(mask.region)] = torch.from_numpy(mask.region)

    def masked(batch, reference):
        signal = torch.where(region, reference["inputs"]["signal"].mean(dim=0), batch["inputs"]["signal"])
        return (model({"signal": signal})["logits"].argmax(dim=1) != batch["labels"]["class"]).numpy()
    by_hand(burst, window, masked)


def test_a_subgroup_is_moved_onto_the_passing_datapoints_as_by_hand(burst):
    findings = burst["findings"]
    key = max((key for key, _ in finding_entries(findings) if key.startswith("subgroups")),
              key=lambda key: np.isin(decode_idx(dict(finding_entries(findings))[key]["idx"], key),
                                      burst["bursts"]).sum())
    rule, _, facts = facts_of(burst)
    plan = plan_for_finding(key, dict(finding_entries(findings))[key], facts)
    assert isinstance(plan, InterventionPlan) and isinstance(plan.intervention, UnitShift)
    result = verify_plan(burst["model"], plan, rule, facts)
    assert result.verdict == CONFIRMED, result.comparison  # the bursts' place in stage 3 is what fails them
    model, shift = burst["model"].model, plan.intervention
    offsets = torch.zeros(16)
    offsets[list(shift.channels)] = torch.tensor(shift.offsets)

    def shifted(batch, reference):
        features = model.backbone.stage3(stage2_units(model, batch["inputs"]["signal"])) + offsets[:, None]
        return (model.head(features).argmax(dim=1) != batch["labels"]["class"]).numpy()
    by_hand(burst, result, shifted)


# ---------------------------------------------------------------------------------- the attention model
def test_an_attention_head_is_patched_at_its_slice_of_the_output_projection(sequences):
    result = run_plan(sequences, UnitPatch("blocks.1.attn", (1,), kind=HEADS))
    net = sequences["model"].model
    width = 32 // 4

    def head_output(batch):
        """Inputs of blocks.1.attn.proj (the heads side by side), and the real tokens."""
        kept = []
        handle = net.blocks[1].attn.proj.register_forward_pre_hook(lambda module, args: kept.append(args[0]))
        net(batch["inputs"])
        handle.remove()
        return kept[0], batch["inputs"]["attention_mask"].bool()

    def patched(batch, reference):
        heads, real = head_output(reference)
        per_datapoint = (heads * real[..., None]).sum(dim=1) / real.sum(dim=1, keepdim=True)
        mean = per_datapoint.mean(dim=0)[width:2 * width]

        def hook(module, args):
            heads = args[0].clone()
            heads[..., width:2 * width] = mean
            return (heads,)
        handle = net.blocks[1].attn.proj.register_forward_pre_hook(hook)
        logits = net(batch["inputs"])["logits"]
        handle.remove()
        return (logits.argmax(dim=1) != batch["labels"]["class"]).numpy()
    by_hand(sequences, result, patched)


def test_a_token_span_is_replaced_by_padding_as_by_hand(sequences):
    span = np.zeros(3, dtype=bool)
    span[0] = True  # the source's token
    result = run_plan(sequences, InputMask("tokens", span, PADDING))
    model = sequences["model"]

    def padded(batch, reference):
        inputs = {key: value.clone() for key, value in batch["inputs"].items()}
        inputs["tokens"][:, 0] = 0
        inputs["attention_mask"][:, 0] = 0
        return (model.model(inputs)["logits"].argmax(dim=1) != batch["labels"]["class"]).numpy()
    by_hand(sequences, result, padded)


def test_the_source_token_of_the_systematic_group_is_the_span_that_fails_it(sequences):
    """Topic 1's messages from the legacy source were labelled topic 2 in training: the legacy source's token (the
    first) is what the model learnt that from. Grad-CAM over the tokens finds it; padding it removes the
    failures."""
    findings = sequences["findings"]
    key = keyed(findings, lambda key, f: key.startswith("meta.slices") and "source = legacy" in f["description"])
    [result] = verify_findings(sequences["epoch_dir"], findings, [key], trust_configs=True)
    assert isinstance(result, Verification) and result.verdict == CONFIRMED, result
    mask = result.plan.intervention
    assert mask.fill == PADDING and np.flatnonzero(mask.region).tolist() == [0]


@pytest.mark.parametrize("run_name", ["burst", "sequences"])
def test_every_finding_offered_gets_a_verdict_saying_what_it_rests_on(run_name, request):
    run = request.getfixturevalue(run_name)
    arguments = ["--run", run["work_dir"], "--verify", "--trust-configs", "--json"]
    printed = subprocess.run([sys.executable, "-m", "runners.analyze", *arguments], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert printed.returncode == 0, printed.stderr
    results = json.loads(printed.stdout)["verifications"]
    offered = [key for key, _ in finding_entries(run["findings"]) if key.rsplit("-", 1)[0] not in NOT_VERIFIABLE]
    assert [r["key"] for r in results] == offered
    for result in results:
        kind = result["key"].rsplit("-", 1)[0]
        if result["verdict"] is None:  # only a group of label suspects may find no check
            assert kind == "suspect_groups" and result["reason"], result
            continue
        assert result["verdict"] in VERDICTS[result["rests_on"]], result
        if result["rests_on"] == "replication":
            assert result["tried"] is None or result["tried"]["verdict"] != "confirmed"
    assert {r["rests_on"] for r in results} >= {"intervention", "replication"}


# -------------------------------------------------------------------------------------- a segmentation
@pytest.mark.slow
def test_a_segmentation_slice_is_verified_from_the_command_line(segmentation, capsys):
    """The run names its failure definition (the worst 15% by IoU) and its table has no label or prediction
    column: verifying reads both right, and a slice's prompt is moved into its object first."""
    findings = segmentation["findings"]
    key = keyed(findings, lambda key, f: key.startswith("meta.slices"))
    printed = subprocess.run([sys.executable, "-m", "runners.analyze", "--run", segmentation["work_dir"], "--verify",
                              key, "--trust-configs", "--json"], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert printed.returncode == 0, printed.stderr
    [result] = json.loads(printed.stdout)["verifications"]
    assert result["verdict"] in VERDICTS[result["rests_on"]]
    tried = result if result["rests_on"] == "intervention" else result["tried"]
    assert "the prompt moved" in tried["intervention"]


@pytest.mark.slow
def test_a_moved_prompt_lands_where_its_target_is_thickest(segmentation):
    model = segmentation["model"]
    rule, failed, facts = facts_of(segmentation)
    assert rule.metric == "iou" and failed.mean() == pytest.approx(0.15, abs=0.01)
    assert facts.prompt == PromptMove("point", "mask")
    result = run_plan(segmentation, facts.prompt, np.sort(np.concatenate([facts.table_idx[failed][:20],
                                                                          facts.table_idx[~failed][:20]])))

    def moved(batch, reference):
        masks = batch["labels"]["mask"][:, 0].numpy() > 0.5
        points = batch["inputs"]["point"].clone()
        for row, mask in enumerate(masks):
            y, x = np.unravel_index(np.argmax(distance_transform_edt(mask)), mask.shape)
            points[row] = torch.tensor([x + 0.5, y + 0.5])
        outputs = model.model({**batch["inputs"], "point": points})
        iou = model.metric(outputs, batch["labels"])["iou"].numpy()
        return rule.failed({"iou": iou}, None, None)
    by_hand(segmentation, result, moved)
    assert isinstance(result, Verification) and not isinstance(result, Replication)
