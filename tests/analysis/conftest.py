"""One small planted-failures run shared by the discovery test and the Failures-tab browser test."""

from __future__ import annotations

import pytest
import torch

from benchmarks.planted_benchmarks import planted
from runners.trainers import BaseTrainer
from tests.e2e.conftest import browser, new_page  # noqa: F401 (the viewer's browser fixtures, for the tab's tests)


@pytest.fixture(scope="session")
def planted_run(tmp_path_factory):
    """The small planted run's config (its ``work_dir`` holds the trained run).

    One thread: on a busy 2-core machine, two OpenMP threads per process spin against each other.
    """
    config = planted(str(tmp_path_factory.mktemp("planted") / "logs" / "planted"), small=True).config
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        BaseTrainer(config).run()
    finally:
        torch.set_num_threads(threads)
    return config
