"""Capture policies on tiny real runs: which datapoints' full outputs reach the pages, checked against the
run's own validation_scores.json, while the epoch table keeps every datapoint's summary."""

from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest
import torch

from analysis.failures import analyze
from debuggers.pages.keep_policy import scores_as_arrays
from debuggers.pages.reader import load_debug_outputs
from runners.config_file import load_config
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.datapoint import load_datapoint
from runners.trainers import BaseTrainer
from tests.runs import train
from utils.errors import ConfigError

ENERGY = """
from debuggers.forward_debugger import ForwardDebugger


class EnergyDebugger(ForwardDebugger):
    def process_forward(self, module, input, output):
        return {{"energy": output.detach().pow(2).mean(dim=(2, 3))}}

    def summary(self, output):
        return {{"mean": float(output["energy"].mean())}}


def energy(name, layer, **entry):
    return {{"name": name, "debugger_config": {{"class": EnergyDebugger, "args": {{"layer_name": layer}}}}, **entry}}


config["debugger"] = {{"class": SequentialDebugger, "args": {args}}}
"""


def _config(tiny_config, name="run", args="{}", **options):
    return tiny_config(name, extra=ENERGY.format(args=args), **options)


def _scores(work_dir, epoch):
    with open(os.path.join(work_dir, f"epoch_{epoch}", "validation_scores.json")) as f:
        scores = json.load(f)
    return {name: dict(zip(scores["datapoint_idx"], values)) for name, values in scores["per_datapoint"].items()}


def _kept(work_dir, epoch, name):
    outputs = load_debug_outputs(os.path.join(work_dir, f"epoch_{epoch}"))
    return {idx for idx in outputs if name in outputs[idx]}


def _table(work_dir, epoch):
    return pq.read_table(os.path.join(work_dir, f"epoch_{epoch}", "epoch_table.parquet")).to_pydict()


def test_failing_keeps_the_wrong_predictions_and_every_summary(tiny_config):
    args = """{"keep": "failing", "debuggers_config": [energy("energy", "backbone.layer4")]}"""
    work_dir = train(_config(tiny_config, args=args, epochs=1, val_size=40))
    wrong = {idx for idx, accuracy in _scores(work_dir, 0)["accuracy"].items() if accuracy == 0}
    assert 0 < len(wrong) < 40, "the tiny model should get some datapoints right and some wrong"
    assert _kept(work_dir, 0, "energy") == wrong
    table = _table(work_dir, 0)
    assert sorted(table["idx"]) == list(range(40))
    assert all(value == value for value in table["energy.mean"])  # a summary (not NaN) for every datapoint
    backend = ViewerBackend([work_dir])
    run = backend.run(work_dir)
    right = min(set(range(40)) - wrong)
    note = load_datapoint(backend, run, backend.epoch(run, "epoch_0"), right, with_item=False)["debug_note"]
    assert f"no debug outputs of datapoint {right} were kept" in note and "'keep'" in note


def test_a_threshold_and_the_worst_k_per_debugger_in_one_run(tiny_config):
    args = """{"debuggers_config": [
        energy("confident", "backbone.layer3", keep={"failing": {"metric": "true_class_confidence", "below": 0.3}}),
        energy("worst", "backbone.layer4", keep={"worst": 5, "by": "cross_entropy"}),
        energy("every", "backbone.layer2"),
    ]}"""
    work_dir = train(_config(tiny_config, args=args, epochs=1, val_size=40, val_batch=6))
    scores = _scores(work_dir, 0)
    confidence, cross_entropy = scores["true_class_confidence"], scores["cross_entropy"]
    assert _kept(work_dir, 0, "confident") == {idx for idx, value in confidence.items() if value < 0.3}
    assert _kept(work_dir, 0, "worst") == set(sorted(cross_entropy, key=cross_entropy.get)[-5:])
    assert _kept(work_dir, 0, "every") == set(range(40))


def test_worst_k_follows_a_higher_is_better_score_the_right_way(tiny_config):
    args = """{"keep": {"worst": 3, "by": "true_class_confidence"},
               "debuggers_config": [energy("energy", "backbone.layer4")]}"""
    work_dir = train(_config(tiny_config, args=args, epochs=1, val_size=24))
    confidence = _scores(work_dir, 0)["true_class_confidence"]
    assert _kept(work_dir, 0, "energy") == set(sorted(confidence, key=confidence.get)[:3])


@pytest.mark.parametrize("keep, message", [
    ("some", "unknown keep policy 'some'"),
    ({"worst": 0, "by": "cross_entropy"}, "'worst' must be a positive int"),
    ({"failing": {"metric": "accuracy", "below": 1, "above": 0}}, "not one score and one threshold"),
])
def test_a_bad_keep_is_explained(tiny_config, keep, message):
    config = load_config(_config(tiny_config, args=f"""{{"keep": {keep!r},
        "debuggers_config": [energy("energy", "backbone.layer4")]}}"""))
    with pytest.raises(ConfigError, match=message):
        BaseTrainer(config).run()


def test_a_keep_naming_a_score_the_metric_lacks_names_the_scores_it_has(tiny_config):
    config = load_config(_config(tiny_config, epochs=1, args="""{"keep": {"worst": 3, "by": "iou",
        "higher_is_better": True}, "debuggers_config": [energy("energy", "backbone.layer4")]}"""))
    with pytest.raises(ConfigError, match=r"reads the score 'iou'.*'accuracy', 'cross_entropy'"):
        BaseTrainer(config).run()


def test_a_wrong_score_name_stops_the_run_at_its_first_validation_batch_and_the_fixed_rerun_runs(tiny_config):
    """Not at the first checkpoint epoch (here the last): epoch 0 validates without capture."""
    args = """{{"keep": {{"failing": {{"metric": {name!r}, "above": 1.0}}}}, "summaries_every_epoch": {summaries},
               "debuggers_config": [energy("energy", "backbone.layer4")]}}"""
    for summaries in (False, True):
        config = load_config(_config(tiny_config, f"typo_{summaries}", epochs=3,
                                     args=args.format(name="cross_entropyy", summaries=summaries)))
        with pytest.raises(ConfigError, match=r"reads the score 'cross_entropyy' \(did you mean 'cross_entropy'"):
            BaseTrainer(config).run()
        assert not os.path.exists(os.path.join(config["work_dir"], "epoch_0", "validation_scores.json"))
        assert not os.path.exists(os.path.join(config["work_dir"], "epoch_1"))
        work_dir = train(_config(tiny_config, f"typo_{summaries}", epochs=3,
                                 args=args.format(name="cross_entropy", summaries=summaries)))
        assert json.load(open(os.path.join(work_dir, "progress.json")))["completed_epochs"] == 3


def test_a_worst_k_by_a_score_the_metric_lacks_says_so_not_that_its_direction_is_unknown(tiny_config):
    config = load_config(_config(tiny_config, epochs=1, args="""{"keep": {"worst": 3, "by": "nonexistent"},
        "debuggers_config": [energy("energy", "backbone.layer4")]}"""))
    with pytest.raises(ConfigError, match=r"reads the score 'nonexistent', but the metric gives"):
        BaseTrainer(config).run()


def test_changing_what_is_captured_keeps_the_run_the_same_run(tiny_config):
    """keep and summaries_every_epoch change what is captured, not what is trained: the run resumes."""
    args = """{{"keep": {keep!r}, "summaries_every_epoch": {summaries}, "debuggers_config": [
        energy("energy", "backbone.layer4", keep={keep!r}), energy("every", "backbone.layer3")]}}"""
    work_dir = train(_config(tiny_config, epochs=1, args=args.format(keep="all", summaries=False)))
    changed = load_config(_config(tiny_config, epochs=1, args=args.format(
        keep={"worst": 3, "by": "cross_entropy"}, summaries=True)))
    BaseTrainer(changed).run()  # not refused as another run
    assert "All 1 epochs are already done" in open(os.path.join(work_dir, "train.log")).read()


NAN_IMAGES = """
class NaNEveryFourth(SyntheticShapesDataset):
    def __getitem__(self, idx):
        datapoint = super().__getitem__(idx)
        if idx % 4 == 0:
            datapoint["inputs"]["image"][:, 0, 0] = float("nan")  # NaN logits for this datapoint
        return datapoint


config["val_dataset"]["class"] = NaNEveryFourth
"""


def test_outputs_that_are_not_a_number_fail_whatever_the_label(tiny_config):
    """argmax of NaN logits is class 0: a datapoint of class 0 with NaN outputs must not pass as right."""
    args = """{"keep": "failing", "debuggers_config": [energy("energy", "backbone.layer4")]}"""
    work_dir = train(tiny_config(extra=ENERGY.format(args=args) + NAN_IMAGES, epochs=1, val_size=40))
    with open(os.path.join(work_dir, "epoch_0", "validation_scores.json")) as f:
        scores = json.load(f)
    accuracy = dict(zip(scores["datapoint_idx"], scores["per_datapoint"]["accuracy"]))
    nan_idx = {idx for idx in range(40) if idx % 4 == 0}
    table = _table(work_dir, 0)
    labels = dict(zip(table["idx"], table["label"]))
    assert any(labels[idx] == 0 for idx in nan_idx), "no NaN datapoint of class 0: the probe proves nothing"
    assert {idx for idx, value in accuracy.items() if value is None} == nan_idx
    assert nan_idx <= _kept(work_dir, 0, "energy")
    right = sum(value == 1 for value in accuracy.values())
    assert scores["aggregated"]["accuracy"] == pytest.approx(right / 40)  # a NaN output counts as wrong
    predictions = dict(zip(table["idx"], table["prediction"]))
    assert all(predictions[idx] is None for idx in nan_idx)  # no prediction
    findings = analyze(work_dir, 0)
    assert findings.failures == 40 - right
    assert sum(map(sum, findings.confusion["matrix"])) == 40 - len(nan_idx)


def test_summaries_every_epoch_equal_those_of_a_full_capture(tiny_config):
    """Epochs that are not checkpoint epochs keep summaries only, and the same summaries as a full capture."""
    debuggers = """[energy("energy", "backbone.layer4")]"""
    cheap = train(_config(tiny_config, "cheap", epochs=3, checkpoint_method="latest",
                          args=f"""{{"summaries_every_epoch": True, "debuggers_config": {debuggers}}}"""))
    full = train(_config(tiny_config, "full", epochs=3, checkpoint_method="all",
                         args=f"""{{"debuggers_config": {debuggers}}}"""))
    for epoch in range(3):
        assert _table(cheap, epoch)["energy.mean"] == pytest.approx(_table(full, epoch)["energy.mean"])
        assert os.path.isdir(os.path.join(cheap, f"epoch_{epoch}", "debugger")) == (epoch == 2)
    assert _table(cheap, 0)["energy.mean"] != pytest.approx(_table(cheap, 2)["energy.mean"])


def test_scores_keep_their_float64_digits():
    # A float64 metric (e.g. a loss near a threshold) must not be rounded through float32 before comparing.
    close = 0.1 + 1e-12
    assert scores_as_arrays({"loss": torch.tensor([close], dtype=torch.float64)}, 1)["loss"][0] == close
    assert scores_as_arrays({"ok": [True, False], "short": [1.0]}, 2) == {"ok": pytest.approx([1.0, 0.0])}
