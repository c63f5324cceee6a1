"""The small runs the --verify tests share: the planted units (tests/runners/planted_units_small_config.py), a Conv1d
model on signals, the attention model on token sequences and the promptable segmenter."""

from __future__ import annotations

import os

import pytest

from analysis.failures import analyze, resolve_epoch_dir
from runners.config_file import load_config
from runners.run_model import EpochModel
from runners.trainers import BaseTrainer
from tests.runs import one_thread as one_torch_thread
from utils.builders import build_from_config

HERE = os.path.dirname(os.path.abspath(__file__))
PLANTED_UNITS_CONFIG = os.path.join(HERE, "planted_units_small_config.py")


@pytest.fixture(scope="module")
def one_thread():
    with one_torch_thread():
        yield


@pytest.fixture(scope="session")
def planted_units_run(tmp_path_factory):
    """The trained run's work dir, epoch folder and config, and the validation datapoints carrying the artefact
    (about 10 s of training on one thread)."""
    config = load_config(PLANTED_UNITS_CONFIG)
    config["work_dir"] = str(tmp_path_factory.mktemp("verify") / "planted_units")
    with one_torch_thread():
        BaseTrainer(config).run()
    dataset = build_from_config(config["val_dataset"])
    return {"work_dir": config["work_dir"], "epoch_dir": resolve_epoch_dir(config["work_dir"], None),
            "config": config, "saturated": [i for i in range(len(dataset)) if dataset.planted(i).saturated]}


def trained(tmp_path_factory, config_file: str, name: str) -> dict:
    """A small run of ``config_file`` (beside this file) trained on one thread: its work dir, last epoch, config,
    findings and rebuilt model."""
    config = load_config(os.path.join(HERE, config_file))
    config["work_dir"] = str(tmp_path_factory.mktemp("verify") / name)
    with one_torch_thread():
        BaseTrainer(config).run()
    epoch_dir = resolve_epoch_dir(config["work_dir"], None)
    return {"work_dir": config["work_dir"], "epoch_dir": epoch_dir, "config": config,
            "findings": analyze(config["work_dir"]).to_dict(), "model": EpochModel.rebuild(epoch_dir, True)}


@pytest.fixture(scope="session")
def burst(tmp_path_factory):
    """A Conv1d model whose unit fires on a burst in the signal (tests/runners/burst_signals.py), and the bursts."""
    run = trained(tmp_path_factory, "burst_signals_config.py", "burst")
    dataset = build_from_config(run["config"]["val_dataset"])
    run["bursts"] = [i for i in range(len(dataset)) if dataset.burst(i)]
    return run


@pytest.fixture(scope="session")
def sequences(tmp_path_factory):
    """The attention model on padded token sequences (tests/runners/sequences_small_config.py)."""
    return trained(tmp_path_factory, "sequences_small_config.py", "sequences")


@pytest.fixture(scope="session")
def segmentation(tmp_path_factory):
    """The promptable segmenter (tests/runners/segmentation_small_config.py)."""
    return trained(tmp_path_factory, "segmentation_small_config.py", "segmentation")
