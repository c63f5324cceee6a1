"""The small planted-units run (tests/runners/planted_units_small_config.py) that the --verify tests share."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
import torch

from analysis.failures import resolve_epoch_dir
from runners.config_file import load_config
from runners.trainers import BaseTrainer
from utils.builders import build_from_config

PLANTED_UNITS_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "planted_units_small_config.py")


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """One thread: on a busy 2-core machine, two OpenMP threads per process spin against each other (4x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


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
