"""``RunDir``: the epochs a run has and what each holds, links never followed, and the one rule for the epoch to use
when none is given, for what the analysis seeks (an epoch table) and what the export seeks (debug outputs)."""

from __future__ import annotations

import os
import re

import pytest

from run_dir import EpochDir, RunDir
from run_dir.errors import EpochNotFoundError, RunFileError
from run_dir.names import DEBUGGER_DIR, EPOCH_TABLE_FILE, EVALUATION_SCORES_FILE, VALIDATION_SCORES_FILE


def epoch(run, number: int, *names: str) -> str:
    """``run/epoch_<number>`` holding ``names`` (a name without a dot is a folder)."""
    folder = RunDir(str(run)).epoch(number).path
    os.makedirs(folder, exist_ok=True)
    for name in names:
        path = os.path.join(folder, name)
        os.makedirs(path) if "." not in name else open(path, "w").close()
    return folder


def test_the_epochs_are_in_order_and_each_says_what_it_holds(tmp_path):
    epoch(tmp_path, 10, EPOCH_TABLE_FILE)
    epoch(tmp_path, 2, EPOCH_TABLE_FILE, DEBUGGER_DIR)
    (tmp_path / "epoch_x").mkdir()
    (tmp_path / "epoch_3").write_text("a file, not an epoch")
    run = RunDir(str(tmp_path))
    assert run.epochs() == [2, 10]
    assert run.epochs_holding(DEBUGGER_DIR) == [2] and run.epochs_holding(EPOCH_TABLE_FILE) == [2, 10]
    assert run.epoch(2).has_debug_outputs and not run.epoch(10).has_debug_outputs
    assert run.epoch(2).scores.endswith(VALIDATION_SCORES_FILE) and run.evaluation.scores.endswith(
        EVALUATION_SCORES_FILE)
    assert not run.is_evaluator


def test_without_an_epoch_the_latest_holding_it_is_used_preferring_captured_debug_outputs(tmp_path):
    captured = epoch(tmp_path, 1, EPOCH_TABLE_FILE, DEBUGGER_DIR)
    epoch(tmp_path, 2, EPOCH_TABLE_FILE)
    run = RunDir(str(tmp_path))
    assert run.epoch_dir() == captured == run.epoch_dir(holding=DEBUGGER_DIR)
    assert run.epoch_dir(2) == RunDir(str(tmp_path)).epoch(2).path
    epoch(tmp_path, 3, EPOCH_TABLE_FILE, DEBUGGER_DIR)
    assert run.epoch_dir() == run.epoch(3).path


def test_an_evaluator_and_an_epoch_folder_are_their_own_epoch(tmp_path):
    (tmp_path / EPOCH_TABLE_FILE).touch()
    (tmp_path / DEBUGGER_DIR).mkdir()
    (tmp_path / EVALUATION_SCORES_FILE).touch()
    assert RunDir(str(tmp_path)).is_evaluator
    assert RunDir(str(tmp_path)).epoch_dir() == str(tmp_path) == RunDir(str(tmp_path)).epoch_dir(holding=DEBUGGER_DIR)
    folder = epoch(tmp_path / "trainer", 4, EPOCH_TABLE_FILE)
    assert RunDir(folder).epoch_dir(4) == folder == RunDir(folder).epoch_dir()
    assert EpochDir(folder).table == os.path.join(folder, EPOCH_TABLE_FILE)


@pytest.mark.parametrize("holding, none, missing", [
    (EPOCH_TABLE_FILE, "holds no epoch table", re.escape("has no epoch table for epoch 7; epochs with one: [1]")),
    (DEBUGGER_DIR, "holds no debug outputs", re.escape("epochs with debug outputs: [1]")),
])
def test_what_is_missing_is_said_with_the_epochs_that_hold_it(tmp_path, holding, none, missing):
    with pytest.raises(EpochNotFoundError, match=none):
        RunDir(str(tmp_path)).epoch_dir(holding=holding)
    epoch(tmp_path, 1, EPOCH_TABLE_FILE, DEBUGGER_DIR)
    with pytest.raises(EpochNotFoundError, match=missing):
        RunDir(str(tmp_path)).epoch_dir(7, holding)
    with pytest.raises(EpochNotFoundError, match="does not exist"):
        RunDir(str(tmp_path / "nowhere")).epoch_dir(holding=holding)


def test_a_folder_of_runs_names_them(tmp_path):
    epoch(tmp_path / "cnn", 0, EPOCH_TABLE_FILE)
    (tmp_path / "vit").mkdir()
    (tmp_path / "vit" / EPOCH_TABLE_FILE).touch()
    with pytest.raises(EpochNotFoundError, match=r"is a folder of runs, not a run: .* \(runs here: cnn, vit\)"):
        RunDir(str(tmp_path)).epoch_dir()


def test_a_linked_epoch_folder_is_never_followed(tmp_path):
    outside = epoch(tmp_path / "outside", 5, EPOCH_TABLE_FILE, DEBUGGER_DIR)
    run = tmp_path / "run"
    epoch(run, 1, EPOCH_TABLE_FILE)
    os.symlink(outside, run / "epoch_5")
    folder = RunDir(str(run))
    assert folder.epochs() == [1]
    [problem] = folder.link_problems()
    assert f"{run / 'epoch_5'} is a symbolic link (to {outside})" in problem
    with pytest.raises(RunFileError, match="is a symbolic link"):
        folder.epoch_dir()
