"""Every example config builds: its components exist and its debuggers' layers are on its model."""

from __future__ import annotations

import glob
import os

import pytest

from runners.config_file import load_config
from tests.runs import REPO_ROOT
from utils.builders import build_from_config

EXAMPLES = sorted(p for p in glob.glob(os.path.join(REPO_ROOT, "configs", "examples", "*.py"))
                  if not p.endswith("__init__.py"))


def test_the_examples_are_found():
    names = {os.path.basename(path) for path in EXAMPLES}
    assert {"cnn_trainer.py", "attention_trainer.py", "cnn_evaluator.py", "custom_debugger_trainer.py",
            "all_debuggers_trainer.py", "attention_debuggers_trainer.py"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_example_builds_and_its_debuggers_fit_its_model(path):
    config = load_config(path)
    assert config["work_dir"] == os.path.join("logs", "examples", os.path.basename(path)[:-3])
    model = build_from_config(config["model"])
    debugger = build_from_config(config["debugger"])
    debugger.register_hooks(model)
    debugger.close()
    for key in ("train_dataset", "val_dataset", "eval_dataset"):
        if key in config:
            assert len(build_from_config(config[key])) > 0
