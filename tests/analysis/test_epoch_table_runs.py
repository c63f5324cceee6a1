"""Real tiny runs write an epoch table for every validation epoch, checked against the run's other files."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from analysis.epoch_table import EpochTable
from data.datasets import SyntheticShapesDataset
from run_dir.names import EPOCH_TABLE_FILE
from runners.config_file import load_config
from runners.eval_viewer.backend.initialization import load_debug_outputs
from runners.evaluators import BaseEvaluator
from tests.runs import train, write_config

VAL_SIZE = 21

SUMMARISED = """
from debuggers.forward_debugger import ForwardDebugger


class Energy(ForwardDebugger):
    def process_forward(self, module, input, output):
        return {"energy": output.detach().pow(2).mean(dim=(2, 3))}

    def summary(self, output):
        return {"total": float(output["energy"].sum()), "first": float(output["energy"][0])}


class Broken(ForwardDebugger):
    def process_forward(self, module, input, output):
        return output.detach().mean(dim=(1, 2, 3))

    def summary(self, output):
        raise ValueError("this summary is broken")


config["debugger"] = {"class": SequentialDebugger, "args": {"debuggers_config": [
    {"name": "energy", "debugger_config": {"class": Energy, "args": {"layer_name": "backbone.layer3"}}},
    {"name": "broken", "debugger_config": {"class": Broken, "args": {"layer_name": "backbone.layer2"}}},
]}}
"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("epoch_table")
    return train(write_config(folder / "run.py", folder / "run", epochs=2, val_size=VAL_SIZE, val_batch=8,
                              extra=SUMMARISED))


def test_every_validation_epoch_has_a_table_matching_its_scores_and_dataset(trained):
    dataset = SyntheticShapesDataset(num_datapoints=VAL_SIZE, resolution=16, split="val")
    for epoch in range(2):
        epoch_dir = os.path.join(trained, f"epoch_{epoch}")
        with open(os.path.join(epoch_dir, "validation_scores.json")) as f:
            scores = json.load(f)
        table = EpochTable(os.path.join(epoch_dir, EPOCH_TABLE_FILE))
        rows = table.page(limit=VAL_SIZE)
        assert [row["idx"] for row in rows] == scores["datapoint_idx"] == list(range(VAL_SIZE))
        for name, values in scores["per_datapoint"].items():
            assert [row[name] for row in rows] == pytest.approx(values), name
        for row in rows:
            datapoint = dataset[row["idx"]]
            assert row["label"] == int(datapoint["labels"]["class"])
            assert row["label_name"] == datapoint["meta_info"]["class_name"] == dataset.CLASS_NAMES[row["label"]]
            assert row["prediction"] == row["predicted_class"]
            assert row["prediction_name"] == dataset.CLASS_NAMES[row["prediction"]]
            assert row["occluded"] is datapoint["meta_info"]["occluded"]
            assert row["contrast"] == pytest.approx(datapoint["meta_info"]["contrast"])
        probabilities = table.values(["probabilities", "label"])
        np.testing.assert_allclose(probabilities["probabilities"].sum(axis=1), 1.0, rtol=1e-5)
        true_class = probabilities["probabilities"][np.arange(VAL_SIZE), probabilities["label"]]
        np.testing.assert_allclose(true_class, scores["per_datapoint"]["true_class_confidence"], rtol=1e-5)


def test_summaries_appear_only_for_debugged_epochs_and_match_the_pages(trained):
    assert not [name for name, _ in EpochTable(os.path.join(trained, "epoch_0", EPOCH_TABLE_FILE)).columns()
                if name.startswith("energy.")]
    epoch_dir = os.path.join(trained, "epoch_1")
    table = EpochTable(os.path.join(epoch_dir, EPOCH_TABLE_FILE))
    names = [name for name, _ in table.columns()]
    assert "energy.total" in names and "energy.first" in names
    assert not [name for name in names if name.startswith("broken.")]
    assert table.roles["summaries"] == ["energy.total", "energy.first"]
    assert table.roles["meta"] == ["class_name", "scale", "occluded", "clutter", "noise_std", "contrast"]
    assert table.roles["scores"] == ["accuracy", "cross_entropy", "true_class_confidence", "predicted_class"]
    assert table.roles["higher_is_better"]["cross_entropy"] is False
    outputs = load_debug_outputs(epoch_dir)
    for row in table.page(limit=VAL_SIZE):
        energy = np.asarray(outputs[row["idx"]]["energy"]["energy"])
        assert row["energy.total"] == pytest.approx(float(energy.sum()), rel=1e-6)
        assert row["energy.first"] == pytest.approx(float(energy[0]), rel=1e-6)
    with open(os.path.join(trained, "train.log")) as f:
        log = f.read()
    assert log.count("debugger 'broken': summary() failed (ValueError: this summary is broken)") == 1


def test_an_evaluation_table_is_the_same_whatever_the_batch_size(trained, tmp_path):
    tables = []
    for batch_size in (1, 8):
        config = load_config(os.path.join(os.path.dirname(trained), "run.py"))
        config = {"runner": BaseEvaluator, "work_dir": str(tmp_path / f"batch{batch_size}"), "seed": 3,
                  "model": config["model"], "metric": config["metric"], "debugger": config["debugger"],
                  "eval_dataset": config["val_dataset"], "checkpoint": trained,
                  "eval_dataloader": {**config["val_dataloader"], "args": {
                      **config["val_dataloader"]["args"], "batch_size": batch_size}}}
        BaseEvaluator(config).run()
        table = EpochTable(os.path.join(config["work_dir"], EPOCH_TABLE_FILE))
        tables.append((table.page(limit=VAL_SIZE), table.values(["probabilities"])["probabilities"]))
    (alone, alone_probabilities), (batched, batched_probabilities) = tables
    assert alone[0].keys() == batched[0].keys() and "energy.total" in alone[0]
    for one, other in zip(alone, batched):
        for name, value in one.items():
            assert other[name] == (pytest.approx(value, rel=1e-4, abs=1e-6) if isinstance(value, float) else value)
    np.testing.assert_allclose(alone_probabilities, batched_probabilities, rtol=1e-4, atol=1e-6)
