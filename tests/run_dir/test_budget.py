"""debug_disk_budget_gb on tiny real runs: the oldest full outputs go, marked, and a kill in the middle of a
removal is completed by the next start."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from run_dir.budget import folder_bytes, keep_under_budget
from run_dir.names import REMOVED_MARKER, REMOVING_DIR
from runners.base_runner import remove_stale_temporaries
from runners.config_file import load_config
from tests.runs import REPO_ROOT, run_main, train

DEBUGGER = """
from debuggers.feature_map_debugger import FeatureMapDebugger
features = {{"class": FeatureMapDebugger, "args": {{"layer_name": "backbone.layer3"}}}}
config["debugger"] = {{"class": SequentialDebugger, "args": {{
    "page_size_mb": {page_mb}, "debuggers_config": [{{"name": "features", "debugger_config": features}}]}}}}
config["debug_disk_budget_gb"] = {budget_gb}
"""
# os.unlink made slow, as on a slow network disk, so that the kill lands while a removal deletes its pages
SLOW_DISK_MAIN = """
import os, sys, time
unlink = os.unlink
def slow_unlink(*args, **kwargs):
    time.sleep(0.05)
    return unlink(*args, **kwargs)
os.unlink = slow_unlink
sys.path.insert(0, {root!r})
import main
sys.exit(main.main(["--config-filepath", {config!r}]))
"""


def _config(tiny_config, budget_gb, page_mb=1, name="run", **options):
    return tiny_config(name, checkpoint_method="all", extra=DEBUGGER.format(budget_gb=budget_gb, page_mb=page_mb),
                       **options)


def _has_outputs(work_dir, epoch):
    return os.path.isdir(os.path.join(work_dir, f"epoch_{epoch}", "debugger"))


def _marker(work_dir, epoch):
    path = os.path.join(work_dir, f"epoch_{epoch}", REMOVED_MARKER)
    return json.load(open(path)) if os.path.exists(path) else None


@pytest.mark.slow
def test_the_oldest_outputs_go_first_and_the_latest_always_stays(tiny_config):
    probe = train(_config(tiny_config, budget_gb=1000, epochs=1, name="probe"))  # sizes one epoch's outputs
    epoch_bytes = folder_bytes(os.path.join(probe, "epoch_0", "debugger"))
    budget_gb = 2.5 * epoch_bytes / 2**30  # room for two epochs, not three
    work_dir = load_config(_config(tiny_config, budget_gb=budget_gb, epochs=4))["work_dir"]
    train(_config(tiny_config, budget_gb=budget_gb, epochs=4))
    assert [_has_outputs(work_dir, epoch) for epoch in range(4)] == [False, False, True, True]
    marker = _marker(work_dir, 0)
    assert marker["message"] == f"removed to stay under {budget_gb:g} GB"
    assert marker["removed_bytes"] > 0 and _marker(work_dir, 2) is None
    for epoch in range(4):  # summaries, scores and checkpoints are never removed
        for name in ("epoch_table.parquet", "validation_scores.json", "checkpoint.pt"):
            assert os.path.exists(os.path.join(work_dir, f"epoch_{epoch}", name)), (epoch, name)
    log = open(os.path.join(work_dir, "train.log")).read()
    assert "epoch 0: debug outputs removed" in log and "epoch 1: debug outputs removed" in log


def test_a_budget_smaller_than_one_epoch_keeps_the_latest_and_says_so(tiny_config):
    work_dir = train(_config(tiny_config, budget_gb=1e-9, epochs=2))
    assert [_has_outputs(work_dir, epoch) for epoch in range(2)] == [False, True]
    log = open(os.path.join(work_dir, "train.log")).read()
    assert "over the 1e-09 GB budget; they are kept" in log
    assert re.search(r"epoch 1's debug outputs alone take \d+\.\d MB, over", log), "a small size printed in GB"


@pytest.mark.slow
def test_a_kill_in_the_middle_of_a_removal_is_completed_on_resume(tiny_config):
    config_path = _config(tiny_config, budget_gb=1e-9, page_mb=0.0005, epochs=3, val_size=40)
    work_dir = load_config(config_path)["work_dir"]
    removing = os.path.join(work_dir, "epoch_0", REMOVING_DIR)
    process = subprocess.Popen([sys.executable, "-c", SLOW_DISK_MAIN.format(root=REPO_ROOT, config=config_path)],
                               cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while not (os.path.isdir(removing) and os.listdir(removing)) and time.monotonic() < deadline:
            assert process.poll() is None, "the run ended before its first removal"
            time.sleep(0.005)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.wait(timeout=30)
    assert _marker(work_dir, 0) is not None and os.listdir(removing), "the kill did not land mid-removal"
    assert not _has_outputs(work_dir, 0)

    result = run_main(config_path)
    assert result.returncode == 0, result.stderr
    assert not os.path.exists(removing)
    assert [_has_outputs(work_dir, epoch) for epoch in range(3)] == [False, False, True]
    assert _marker(work_dir, 0)["message"] == "removed to stay under 1e-09 GB"
    assert all(os.path.exists(os.path.join(work_dir, f"epoch_{e}", "epoch_table.parquet")) for e in range(3))


def _epochs_with_outputs(work_dir, sizes):
    """Epoch folders with ``debugger/`` outputs of the given sizes in bytes, as finished epochs leave them."""
    for epoch, size in enumerate(sizes):
        os.makedirs(os.path.join(work_dir, f"epoch_{epoch}", "debugger"))
        with open(os.path.join(work_dir, f"epoch_{epoch}", "debugger", "page_0.pkl"), "wb") as page:
            page.write(b"\0" * size)


@pytest.mark.parametrize("name", ["exp[1]", "exp*", "exp?"])
def test_a_work_dir_named_like_a_glob_pattern_never_touches_its_neighbours(tmp_path, name):
    """'exp[1]' as a pattern matches the folder 'exp1': the budget must count, remove and complete removals in
    its own epochs only, and stale temporaries of its own folders only."""
    ours, neighbour = tmp_path / name / "run", tmp_path / "exp1" / "run"
    _epochs_with_outputs(str(ours), [1000, 1000, 1000])
    _epochs_with_outputs(str(neighbour), [4 * 2**20] * 6)
    (neighbour / "epoch_2" / REMOVED_MARKER).write_text("{}")  # a removal the neighbour's next start completes
    stale = neighbour / "epoch_1" / ".scores.json.tmp-123-456"
    stale.write_text("{}")
    removed = keep_under_budget(str(ours), 2**20 / 2**30, logging.getLogger("test"), completed_epochs=3)
    remove_stale_temporaries(str(ours))
    assert removed == [] and all(_has_outputs(str(ours), epoch) for epoch in range(3))
    assert all(_has_outputs(str(neighbour), epoch) for epoch in range(6)) and stale.exists()
