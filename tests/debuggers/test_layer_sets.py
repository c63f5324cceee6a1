"""One config entry, a debugger on every module of a type or name pattern (debuggers/wrappers/layer_sets.py)."""

from __future__ import annotations

import logging
import os

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from torch import nn

from debuggers import ActivationStatsDebugger, FeatureMapDebugger, GradCAMDebugger, SequentialDebugger
from runners.config_file import load_config
from runners.trainers import BaseTrainer
from tests.debuggers.library import run_epoch
from utils.errors import ConfigError


def layers_entry(name, layers, cls, **args):
    return {"name": name, "layers": layers, "debugger_config": {"class": cls, "args": args}}


@pytest.fixture
def images():
    torch.manual_seed(1)
    return torch.randn(6, 3, 16, 16)


def test_every_conv2d_gets_its_own_debugger_and_output(model, images, tmp_path, caplog):
    convs = [name for name, module in model.named_modules() if isinstance(module, nn.Conv2d)]
    with caplog.at_level(logging.INFO, logger="lantern.debugger"):
        _, outputs = run_epoch(model, images, tmp_path, 3, [layers_entry("stats", {"type": "Conv2d"},
                                                                        ActivationStatsDebugger)])
    assert list(outputs[4]) == [f"stats/{name}" for name in convs]
    logged = [r.getMessage() for r in caplog.records if "debugger 'stats'" in r.getMessage()]
    assert len(logged) == 1 and f"{len(convs)} hook(s), one on each module of type Conv2d" in logged[0]
    seen = {}  # independently: plain hooks on a forward of datapoint 4 alone
    handles = [model.get_submodule(name).register_forward_hook(
        lambda m, args, out, name=name: seen.__setitem__(name, out.clone())) for name in convs]
    with torch.no_grad():
        model({"image": images[4:5]})
    for handle in handles:
        handle.remove()
    for name in convs:
        stats = outputs[4][f"stats/{name}"]
        assert stats["layer_name"] == name and stats["module_type"] == "Conv2d"
        assert stats["mean"] == pytest.approx(float(seen[name].mean()), rel=1e-5)
        np.testing.assert_allclose(stats["channel_means"], seen[name][0].mean(dim=(1, 2)).numpy(), rtol=1e-5)


def test_a_name_pattern_and_a_type_together(model, images, tmp_path):
    _, outputs = run_epoch(model, images, tmp_path, 3, [
        layers_entry("relus", {"name": "backbone.*.relu"}, FeatureMapDebugger, max_channels=2),
        layers_entry("late", {"type": ["BatchNorm2d"], "name": ["backbone.layer3.*", "backbone.layer4.*"]},
                     ActivationStatsDebugger)])
    assert list(outputs[0]) == [f"relus/backbone.layer{i}.relu" for i in range(1, 5)] + [
        "late/backbone.layer3.bn", "late/backbone.layer4.bn"]
    assert outputs[0]["relus/backbone.layer2.relu"]["feature_map"].shape == (2, 8, 8)


def test_a_debugger_of_a_target_layer_gets_each_module_as_its_target(model, images, tmp_path):
    _, outputs = run_epoch(model, images, tmp_path, 3, [
        layers_entry("cam", {"name": "backbone.layer[34]"}, GradCAMDebugger)])
    assert [outputs[1][name]["target_layer"] for name in outputs[1]] == ["backbone.layer3", "backbone.layer4"]


@pytest.mark.parametrize("layers, message", [
    ({"type": "Conv3d"}, "no module of SmallCNN is a Conv3d; closest types in the model: ['Conv2d']"),
    ({"name": "backbone.*.rleu"}, "pattern 'backbone.*.rleu' matches no module of SmallCNN; closest names: "
                                  "['backbone.layer4.relu'"),
    ({"type": "Linear", "name": "backbone.*"}, "no module of SmallCNN is both of type Linear and named backbone.*"),
    ({"types": "Conv2d"}, "must be a dict with 'type' (module class names or classes) and/or 'name'"),
    ({"type": 3}, "['layers']['type'] must be a class name or class or a list of them, got 3"),
])
def test_a_spec_that_matches_nothing_says_what_is_there(model, layers, message):
    with pytest.raises(ConfigError) as error:
        SequentialDebugger([layers_entry("x", layers, ActivationStatsDebugger)], model=model)
    assert message in str(error.value)


def test_a_layer_argument_given_twice_or_missing_is_refused(model):
    with pytest.raises(ConfigError, match="'layers' sets layer_name for each module; leave layer_name='a' out"):
        SequentialDebugger([layers_entry("x", {"type": "Conv2d"}, ActivationStatsDebugger, layer_name="a")])
    with pytest.raises(ConfigError, match="which 'SequentialDebugger' does not take"):
        SequentialDebugger([layers_entry("x", {"type": "Conv2d"}, SequentialDebugger)])


def test_a_run_logs_the_hooks_and_tables_each_module_s_summary(tiny_config):
    extra = """
from debuggers import ActivationStatsDebugger
config["debugger"] = {"class": SequentialDebugger, "args": {"debuggers_config": [
    {"name": "conv_stats", "layers": {"type": "Conv2d"},
     "debugger_config": {"class": ActivationStatsDebugger, "args": {}}}]}}
"""
    config = load_config(tiny_config(epochs=1, train_size=16, val_size=4, extra=extra))
    BaseTrainer(config).run()
    log = open(os.path.join(config["work_dir"], "train.log")).read()
    assert "debugger 'conv_stats': 4 hook(s), one on each module of type Conv2d" in log
    columns = pq.read_schema(os.path.join(config["work_dir"], "epoch_0", "epoch_table.parquet")).names
    assert {f"conv_stats/backbone.layer{i}.conv.sparsity" for i in range(1, 5)} <= set(columns)
