"""``--verify`` on a real trained run with planted causes (tests/runners/planted_units_small_config.py): the unit that
makes the saturated datapoints fail is confirmed, the monitor unit that only copies it is correlational, a Grad-CAM
region on the artefact is confirmed; each rerun is checked against a hand-written one. And the refusals: no trust
flag, a missing or damaged checkpoint, a config file changed since the run or lying in the run folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from analysis.epoch_table import EpochTable
from analysis.failures import FailureDefinition, analyze
from analysis.finding_plans import RunFacts
from analysis.intervention import (
    CONFIRMED,
    CORRELATIONAL,
    FailureRule,
    InputMask,
    InterventionPlan,
    OutcomeCounts,
    UnitPatch,
)
from configs.examples.planted_units_trainer import CLAMP, UNIT
from data.datasets import SyntheticShapesDataset, collate_datapoints
from data.datasets.synthetic_shapes import SATURATION_VALUE
from metrics import ClassificationMetric
from models import SmallCNN
from run_dir.names import EPOCH_TABLE_FILE
from runners.analyze import main as analyze_main
from runners.run_model import Cancelled, EpochModel
from runners.verify import Verification, VerifyError, verify_findings, verify_plan
from tests.runners.conftest import PLANTED_UNITS_CONFIG
from tests.runs import REPO_ROOT
from utils.builders import build_from_config

pytestmark = [pytest.mark.timeout(600), pytest.mark.usefixtures("one_thread")]


@pytest.fixture(scope="module")
def run(planted_units_run):
    return planted_units_run


def table_failures(epoch_dir: str) -> dict[int, bool]:
    values = EpochTable(os.path.join(epoch_dir, EPOCH_TABLE_FILE)).values(["idx", "label", "prediction"])
    return dict(zip(values["idx"].tolist(), (values["label"] != values["prediction"]).tolist()))


def verified(run, findings: dict, keys=None) -> list[Verification]:
    return verify_findings(run["epoch_dir"], findings, keys, trust_configs=True)


def hand_built_model(run) -> torch.nn.Module:
    model = build_from_config(run["config"]["model"])
    state = torch.load(os.path.join(run["epoch_dir"], "checkpoint.pt"), map_location="cpu", weights_only=True)
    model.load_state_dict(state["model_state_dict"])
    return model.eval()


def images_and_labels(run, idx: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    dataset = build_from_config(run["config"]["val_dataset"])
    items = [dataset[i] for i in idx]
    return (torch.stack([item["inputs"]["image"] for item in items]),
            torch.stack([item["labels"]["class"] for item in items]))


def counts_by_hand(before: dict[int, bool], idx: list[int], failed_after: dict[int, bool]) -> OutcomeCounts:
    return OutcomeCounts.of(np.array([before[i] for i in idx]), np.array([failed_after[i] for i in idx]))


def test_the_unit_that_makes_them_fail_is_confirmed_and_the_monitor_that_copies_it_is_correlational(run):
    # separating quantities as Findings.to_dict() writes them; both columns separate the saturated failures
    findings = {"separators": [{"column": "unit_energy.c3", "auroc": 0.7, "direction": "higher in failures"},
                               {"column": "monitor_energy.c0", "auroc": 0.7, "direction": "higher in failures"}]}
    cause, monitor = verified(run, findings)
    assert cause.plan.intervention == UnitPatch("trigger", (UNIT,))
    assert monitor.plan.intervention == UnitPatch("monitor", (0,))
    assert set(cause.plan.idx) >= set(run["saturated"])  # the finding holds every planted datapoint
    assert cause.verdict == CONFIRMED, cause.comparison
    assert cause.comparison.finding.fixed >= 0.5 * cause.comparison.finding.failures_before
    assert monitor.verdict == CORRELATIONAL, monitor.comparison
    assert monitor.comparison.finding.fixed == monitor.comparison.finding.broken == 0  # it feeds nothing


def test_the_unit_patch_gives_the_outcomes_of_a_hand_written_rerun(run):
    [result] = verified(run, {"separators": [{"column": "unit_energy.c3", "direction": "higher in failures"}]})
    model = hand_built_model(run)
    failed_after = {}
    with torch.no_grad():
        images, _ = images_and_labels(run, result.reference_idx)
        mean = trigger_output(model, images).mean(dim=0)
        rows = sorted(set(result.plan.idx) | set(result.control_idx))
        images, labels = images_and_labels(run, rows)
        units = trigger_output(model, images)
        units[:, UNIT] = mean[UNIT]
        logits = model.head(model.backbone.layer4(model.backbone.layer3(units)))
    failed_after = dict(zip(rows, (logits.argmax(dim=1) != labels).tolist()))
    before = table_failures(run["epoch_dir"])
    assert result.comparison.finding == counts_by_hand(before, result.plan.idx, failed_after)
    assert result.comparison.control == counts_by_hand(before, result.control_idx, failed_after)


def trigger_output(model: torch.nn.Module, images: torch.Tensor) -> torch.Tensor:
    """What ``PlantedUnitCNN`` computes up to its ``trigger`` module, written out."""
    saturated = (images.abs().amax(dim=1, keepdim=True) > SATURATION_VALUE / 2).float()
    x = model.backbone.layer2(model.backbone.layer1(images.clamp(-CLAMP, CLAMP)))
    return model.trigger(x, saturated)


def test_a_grad_cam_region_on_the_artefact_is_confirmed_and_a_region_elsewhere_is_not(run):
    saturated = run["saturated"]
    findings = {"groups": [{"description": "the saturated datapoints", "idx": saturated},
                           {"description": "the same, top-left corner masked", "idx": saturated,
                            "region": {"input": "image", "box": [0, 0, 4, 4]}}]}
    on_artefact, elsewhere = verified(run, findings)
    region = on_artefact.plan.intervention.region
    rows, cols = np.nonzero(region)
    assert isinstance(on_artefact.plan.intervention, InputMask) and "Grad-CAM" in on_artefact.plan.why
    assert region[-2:, -2:].all() and rows.min() >= 8 and cols.min() >= 8  # the saturated block: bottom right
    assert on_artefact.verdict == CONFIRMED, on_artefact.comparison
    assert elsewhere.verdict == CORRELATIONAL, elsewhere.comparison

    model = hand_built_model(run)
    with torch.no_grad():
        mean = images_and_labels(run, on_artefact.reference_idx)[0].mean(dim=0)
        images, labels = images_and_labels(run, saturated)
        masked = torch.where(torch.from_numpy(region), mean, images)
        logits = model({"image": masked})["logits"]
    failed_after = dict(zip(saturated, (logits.argmax(dim=1) != labels).tolist()))
    assert on_artefact.comparison.finding == counts_by_hand(table_failures(run["epoch_dir"]), saturated, failed_after)


@pytest.mark.slow
def test_the_command_prints_what_the_function_finds(run, capsys):
    findings = analyze(run["work_dir"]).to_dict()
    expected = [r.to_dict() for r in verified(run, findings)]
    assert any(r["verdict"] for r in expected), "no finding of the run could be verified"
    arguments = ["--run", run["work_dir"], "--verify", "--trust-configs"]
    printed = subprocess.run([sys.executable, "-m", "runners.analyze", *arguments, "--json"], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert printed.returncode == 0, printed.stderr
    got = json.loads(printed.stdout)["verifications"]
    keep = ("key", "verdict", "finding_counts", "control_counts", "idx", "control_idx")
    assert [{k: r.get(k) for k in keep} for r in got] == [{k: r.get(k) for k in keep} for r in expected]
    assert analyze_main(arguments) == 0
    text = capsys.readouterr().out
    assert "Verified by intervention" in text
    for result in expected:
        assert result["key"] in text and (result["verdict"] or "not verifiable") in text


def test_verify_refuses_to_import_the_runs_config_without_the_trust_flag(run, capsys):
    assert analyze_main(["--run", run["work_dir"], "--verify"]) == 2
    error = capsys.readouterr().err
    assert "--trust-configs" in error and "planted_units_small_config.py" in error


@pytest.fixture
def copied_run(run, tmp_path):
    """A copy of the run to damage (the run folder holds no path to itself)."""
    work_dir = str(tmp_path / "copy")
    shutil.copytree(run["work_dir"], work_dir)
    return work_dir, os.path.join(work_dir, os.path.basename(run["epoch_dir"]))


def test_a_missing_or_damaged_checkpoint_is_named(copied_run, capsys):
    work_dir, epoch_dir = copied_run
    checkpoint = os.path.join(epoch_dir, "checkpoint.pt")
    with open(checkpoint, "r+b") as file:
        file.truncate(os.path.getsize(checkpoint) // 2)
    assert analyze_main(["--run", work_dir, "--verify", "--trust-configs"]) == 2
    error = capsys.readouterr().err
    assert "checkpoint.pt" in error and "cannot be read" in error and "Traceback" not in error
    os.remove(checkpoint)
    assert analyze_main(["--run", work_dir, "--verify", "--trust-configs"]) == 2
    error = capsys.readouterr().err
    assert f"{os.path.basename(epoch_dir)} of {work_dir} has no checkpoint.pt" in error and "--epoch" in error


def test_a_config_changed_since_the_run_or_lying_in_the_run_folder_is_refused(copied_run, tmp_path, capsys):
    work_dir, _ = copied_run
    edited = tmp_path / "edited_config.py"
    edited.write_text(f"from runpy import run_path\nconfig = run_path({PLANTED_UNITS_CONFIG!r})['config']\n"
                      "config['model']['args']['widths'] = (8, 8, 16, 16)\n")
    inside = os.path.join(work_dir, "config.py")
    shutil.copy(PLANTED_UNITS_CONFIG, inside)
    info_path = os.path.join(work_dir, "run_info.json")
    info = json.load(open(info_path))
    for path, message in ((str(edited), "changed since the run: model.args.widths"),
                          (inside, "lies inside the run folder")):
        json.dump({**info, "config_filepath": path}, open(info_path, "w"))
        assert analyze_main(["--run", work_dir, "--verify", "--trust-configs"]) == 2
        assert message in capsys.readouterr().err


def test_a_config_in_another_run_folder_or_linked_into_one_is_never_imported(copied_run, run, tmp_path, capsys):
    """A run folder is data, whoever made it: run_info.json naming a config file that lies in another run's
    folder (a sibling in the same logs), or a link from the project into a run folder, imports nothing."""
    work_dir, _ = copied_run
    sibling = tmp_path / "sibling"
    shutil.copytree(run["work_dir"], sibling)
    marker = tmp_path / "imported"
    planted = sibling / "epoch_cfg" / "config.py"
    planted.parent.mkdir()
    planted.write_text(open(PLANTED_UNITS_CONFIG).read() + f"\nopen({str(marker)!r}, 'w').close()\n")
    linked = tmp_path / "configs" / "linked.py"
    linked.parent.mkdir()
    os.symlink(os.path.join(work_dir, "config.py"), linked)
    shutil.copy(PLANTED_UNITS_CONFIG, os.path.join(work_dir, "config.py"))
    info_path = os.path.join(work_dir, "run_info.json")
    info = json.load(open(info_path))
    for path in (planted, linked):
        json.dump({**info, "config_filepath": str(path)}, open(info_path, "w"))
        assert analyze_main(["--run", work_dir, "--verify", "--trust-configs"]) == 2
        assert "run folder" in capsys.readouterr().err, path
    assert not marker.exists()


def test_an_unknown_finding_key_lists_the_known_ones(run, capsys):
    assert analyze_main(["--run", run["work_dir"], "--verify", "slices-99", "--trust-configs"]) == 2
    error = capsys.readouterr().err
    assert "no finding 'slices-99'" in error and "separators-0" in error


def test_a_cancelled_verification_stops(run):
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        verify_findings(run["epoch_dir"], {"groups": [{"idx": run["saturated"], "module": "trigger"}]},
                        trust_configs=True, cancel=cancel)


def test_a_nan_module_patch_replaces_only_the_nan_values(tmp_path):
    """A NaN origin's patch, checked by hand on a small untrained model whose overflow gate fires on saturated
    images: NaN becomes the passing mean there, everything else is left as it is."""
    torch.manual_seed(0)
    model = SmallCNN(num_classes=3, widths=(4, 8, 8, 8), nan_layer="backbone.layer2").eval()
    dataset = SyntheticShapesDataset(120, resolution=16, num_classes=3, split="val", saturated_fraction=0.3)
    loader = {"class": DataLoader, "args": {"batch_size": 32, "collate_fn": collate_datapoints}}
    epoch_model = EpochModel(model, ClassificationMetric(), dataset, loader, torch.device("cpu"), {}, "", "")
    images = torch.stack([dataset[i]["inputs"]["image"] for i in range(120)])
    labels = torch.tensor([int(dataset[i]["labels"]["class"]) for i in range(120)])
    with torch.no_grad():
        gate = model.backbone.layer2(model.backbone.layer1(images))
        logits = model.head(model.backbone.layer4(model.backbone.layer3(gate)))
    failed = ~(logits.isfinite().all(dim=1) & (logits.argmax(dim=1) == labels))
    nan_rows = ~gate.flatten(1).isfinite().all(dim=1)
    assert nan_rows.sum() >= 20 and failed[nan_rows].all()
    plan = InterventionPlan("nan_origins-0", "backbone.layer2.overflow", np.flatnonzero(nan_rows).tolist(),
                            UnitPatch("backbone.layer2.overflow", None, nonfinite_only=True), "NaN")
    facts = RunFacts(np.arange(120), failed.numpy(), frozenset(), {}, lambda column: None)
    result = verify_plan(epoch_model, plan, FailureRule(None), facts)
    with torch.no_grad():
        mean = gate[result.reference_idx].mean(dim=0)
        patched = torch.where(gate.isfinite(), gate, mean)
        logits = model.head(model.backbone.layer4(model.backbone.layer3(patched)))
    after = dict(enumerate((logits.argmax(dim=1) != labels).tolist()))
    before = dict(enumerate(failed.tolist()))
    assert result.comparison.finding == counts_by_hand(before, plan.idx, after)
    assert result.comparison.control == counts_by_hand(before, result.control_idx, after)
    assert result.comparison.finding.fixed > 0  # the NaN datapoints get a prediction again


def test_the_failure_definition_of_the_analysis_is_the_one_rerun(run):
    """With the worst 20% of cross-entropy as failures, the rerun judges by the same cut."""
    definition = FailureDefinition("cross_entropy", 0.2)
    findings = {"separators": [{"column": "unit_energy.c3", "direction": "higher in failures"}]}
    [result] = verify_findings(run["epoch_dir"], findings, trust_configs=True, failure=definition)
    table = EpochTable(os.path.join(run["epoch_dir"], EPOCH_TABLE_FILE))
    failed, _ = definition.failed(table, {})
    before = dict(zip(table.values(["idx"])["idx"].tolist(), failed.tolist()))
    assert result.comparison.finding.failures_before == sum(before[i] for i in result.plan.idx)


class SkipsItsBranchOnLargeBatches(torch.nn.Module):
    """Runs ``branch`` only on batches of at most 32 datapoints (the reference's): a module some passes skip, as
    code that ``torch.compile`` compiled skips the hooks added later."""

    def __init__(self) -> None:
        super().__init__()
        self.branch = torch.nn.Conv2d(3, 3, 1)
        self.head = torch.nn.Linear(3, 3)

    def forward(self, inputs: dict) -> dict:
        image = inputs["image"]
        features = self.branch(image) if len(image) <= 32 else image
        return {"logits": self.head(features.mean(dim=(2, 3)))}


def test_a_patch_whose_module_did_not_run_is_an_error_not_a_verdict():
    dataset = SyntheticShapesDataset(200, resolution=16, num_classes=3, split="val")
    loader = {"class": DataLoader, "args": {"batch_size": 64, "collate_fn": collate_datapoints}}
    torch.manual_seed(0)
    model = EpochModel(SkipsItsBranchOnLargeBatches().eval(), ClassificationMetric(), dataset, loader,
                       torch.device("cpu"), {}, "", "")
    with torch.no_grad():  # the epoch's outcomes, each datapoint on its own (the branch runs)
        failed = np.array([int(model.model({"image": dataset[i]["inputs"]["image"][None]})["logits"].argmax())
                           != int(dataset[i]["labels"]["class"]) for i in range(200)])
    plan = InterventionPlan("slices-0", "a slice", list(range(0, 60)), UnitPatch("branch", (0,)), "a unit")
    facts = RunFacts(np.arange(200), failed, frozenset(), {}, lambda column: None)
    with pytest.raises(VerifyError, match="branch did not run in the patched forward pass"):
        verify_plan(model, plan, FailureRule(None), facts)
