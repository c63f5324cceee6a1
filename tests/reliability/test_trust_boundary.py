"""A run folder is data: the viewer and the export show a datapoint's inputs from what the run captured and
import no code that anything in the folder names, unless the user opts in with --trust-configs.

Each crafted ``run_info.json`` names a config file that would create a marker file when imported: an absolute
path outside the run, a path relative to the viewer's working directory, and a symlink shipped inside the run.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import torch.nn.functional as F

from data.datasets import SyntheticShapesDataset
from runners.config_file import load_config
from runners.eval_viewer.backend.initialization import DebugOutputs
from runners.eval_viewer.controls.ids import EPOCH_SELECT, RUN_SELECT
from runners.eval_viewer.datapoint.ids import DATAPOINT_PANEL, TAB_DATAPOINT
from runners.eval_viewer.export.__main__ import main as export_main
from runners.eval_viewer.shared.ids import SELECTED, TABS
from runners.trainers import BaseTrainer
from tests.reliability.viewer_server import call_callback, viewer_process
from tests.runs import write_config

pytestmark = pytest.mark.timeout(400)

EPOCH = "epoch_1"
LIMITS = """
from configs.examples.custom_debugger_trainer import ChannelEnergyDebugger
config["debugger"] = {"class": SequentialDebugger, "args": {"debuggers_config": [
    {"name": "layer3_energy",
     "debugger_config": {"class": ChannelEnergyDebugger, "args": {"layer_name": "backbone.layer3"}}}]}}
config["datapoint_capture"] = {"max_value_kb": 1, "max_total_mb": 0.01}
"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A two-epoch run (24 validation datapoints of 16x16 images) with a 1 KB per value capture limit, so
    images are downsampled, and a 10 KB total limit, so only the first datapoints are captured."""
    root = tmp_path_factory.mktemp("trust")
    (root / "configs").mkdir()
    path = write_config(root / "configs" / "run.py", root / "runs" / "run", epochs=2, checkpoint_method="all",
                        extra=LIMITS)
    BaseTrainer(load_config(path)).run()
    return str(root / "runs" / "run")


def _evil_config(path, marker):
    with open(path, "w") as f:
        f.write(f"open({str(marker)!r}, 'w').close()\nconfig = {{}}\n")


def _name_config(run_dir, config_filepath):
    info_path = os.path.join(run_dir, "run_info.json")
    with open(info_path) as f:
        info = json.load(f)
    with open(info_path, "w") as f:
        json.dump({**info, "config_filepath": config_filepath}, f)


def _datapoint(url, run_dir, idx):
    status, body = call_callback(url, f"{DATAPOINT_PANEL}.children", {
        f"{SELECTED}.data": idx, f"{RUN_SELECT}.value": run_dir, f"{EPOCH_SELECT}.value": EPOCH,
        f"{TABS}.value": TAB_DATAPOINT})
    assert status == 200, body
    return body


def test_captured_inputs_are_the_datasets_downsampled_once_per_run_and_bounded(trained):
    with open(os.path.join(trained, "train.log")) as f:
        log = f.read()
    # captured at the first validation only, stopped by its limit
    assert log.count("Datapoint capture stops before") == 1 and log.count("Captured the inputs") == 1
    captured = DebugOutputs(os.path.join(trained, "datapoints"))
    dataset = SyntheticShapesDataset(num_datapoints=24, resolution=16, split="val")
    assert captured.complete and 0 < len(captured) < 24 and list(captured) == list(range(len(captured)))
    for idx in captured:
        item, expected = captured[idx], dataset[idx]
        image = item["inputs"]["image"]
        assert image.shape == (3, 8, 8) and image.nbytes <= 1024  # 3x16x16 float32 is 3 KB: halved per side
        reference = expected["inputs"]["image"].numpy().reshape(3, 8, 2, 8, 2).mean(axis=(2, 4))
        np.testing.assert_allclose(image, reference, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(image, F.avg_pool2d(expected["inputs"]["image"][None], 2)[0].numpy(), atol=1e-6)
        assert item["labels"]["class"] == int(expected["labels"]["class"])
        assert item["meta_info"]["idx"] == idx
        assert item["meta_info"]["class_name"] == expected["meta_info"]["class_name"]


def test_no_code_named_by_a_run_folder_runs_without_the_opt_in(trained, tmp_path):
    marker, cwd, logs = tmp_path / "imported", tmp_path / "cwd", tmp_path / "logs"
    cwd.mkdir()
    _evil_config(tmp_path / "evil.py", marker)
    _evil_config(cwd / "evil.py", marker)
    runs = {naming: str(logs / naming) for naming in ("absolute", "relative", "symlink_in_the_run")}
    for run_dir in runs.values():
        shutil.copytree(trained, run_dir)
    os.symlink(tmp_path / "evil.py", os.path.join(runs["symlink_in_the_run"], "config.py"))
    _name_config(runs["absolute"], str(tmp_path / "evil.py"))
    _name_config(runs["relative"], "evil.py")  # relative to the viewer's working directory
    _name_config(runs["symlink_in_the_run"], os.path.join(runs["symlink_in_the_run"], "config.py"))
    with viewer_process(["--log-dirs", str(logs)], cwd=str(cwd)) as (url, _output):
        for run_dir in runs.values():
            shown, missing = _datapoint(url, run_dir, 0), _datapoint(url, run_dir, 23)
            assert '"type":"Img"' in shown and "not captured" not in shown  # captured inputs, no dataset needed
            assert "were not captured" in missing and "--trust-configs" in missing
            assert export_main(["--run", run_dir, "--idx", "0", "23", "--out", str(tmp_path / "r.html")]) == 0
            shutil.rmtree(os.path.join(run_dir, "datapoints"))  # now a run that captured nothing at all
            assert "holds no captured inputs" in _datapoint(url, run_dir, 0)
    assert not marker.exists()


@pytest.mark.slow
def test_the_opt_in_rebuilds_what_the_run_did_not_capture(trained, tmp_path):
    run_dir = str(tmp_path / "logs" / "run")
    shutil.copytree(trained, run_dir)
    marker = tmp_path / "imported"
    config = tmp_path / "project_config.py"
    _evil_config(config, marker)
    _name_config(run_dir, str(config))
    with viewer_process(["--log-dirs", str(tmp_path / "logs"), "--trust-configs"], cwd=str(tmp_path)) as (url, _output):
        body = _datapoint(url, run_dir, 23)
    assert marker.exists()  # the user asked for it: the named config was imported
    assert "has no 'val_dataset' entry" in body
