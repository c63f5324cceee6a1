"""Crafted run folders against a real viewer server: one bad run never blocks the others, and what is broken
shows as a message in place of the part it breaks (never an HTTP 500 for the whole epoch)."""

from __future__ import annotations

import json
import os
import shutil
import threading

import pytest

from runners.eval_viewer.layout import ids
from runners.trainers import BaseTrainer
from tests.reliability.crafted_index import INDEX_DAMAGES, damage_index
from tests.reliability.viewer_server import call_callback, serve_viewer
from tests.runs import write_config
from utils.config_file import load_config

pytestmark = pytest.mark.timeout(120)

DEBUGGER = """
from configs.examples.custom_debugger_trainer import ChannelEnergyDebugger
config["debugger"] = {"class": SequentialDebugger, "args": {"page_size_mb": 0.001, "debuggers_config": [
    {"name": "layer3_energy",
     "debugger_config": {"class": ChannelEnergyDebugger, "args": {"layer_name": "backbone.layer3"}}}]}}
"""
EPOCH = "epoch_0"


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """One tiny trained run with debug outputs at epoch 0 (several pages); its config outside any log folder."""
    root = tmp_path_factory.mktemp("trust_viewer")
    (root / "configs").mkdir()
    path = write_config(root / "configs" / "run.py", root / "runs" / "run", epochs=1, val_size=8, extra=DEBUGGER)
    BaseTrainer(load_config(path)).run()
    return str(root / "runs" / "run")


def _copy(trained_run, logs, name):
    target = os.path.join(logs, name)
    shutil.copytree(trained_run, target)
    return target


def _datapoint(url, run_path, idx=0, timeout=30):
    return call_callback(url, f"{ids.DATAPOINT_PANEL}.children", {
        f"{ids.SELECTED}.data": idx, f"{ids.RUN_SELECT}.value": run_path, f"{ids.EPOCH_SELECT}.value": EPOCH,
        f"{ids.TABS}.value": ids.TAB_DATAPOINT}, timeout=timeout)


def _table(url, run_path):
    """The first rows of the epoch's table, as the grid asks for them."""
    query = {"run": run_path, "epoch": EPOCH, "metric": "cross_entropy", "version": None, "idx": None}
    return call_callback(url, f"{ids.TABLE}.getRowsResponse", {
        f"{ids.TABLE}.getRowsRequest": {"startRow": 0, "endRow": 100}, f"{ids.TABLE_QUERY}.data": query})


def test_a_page_that_blocks_forever_does_not_block_other_runs(trained_run, tmp_path):
    """A FIFO named like an unindexed page blocks whoever opens it; requests for other runs must still be
    answered (the epoch view is built outside the shared cache lock)."""
    logs = str(tmp_path / "logs")
    good, stuck = _copy(trained_run, logs, "good"), _copy(trained_run, logs, "stuck")
    fifo = os.path.join(stuck, EPOCH, "debugger", "page_999.pkl")
    os.mkfifo(fifo)
    with serve_viewer([logs]) as url:
        blocked = threading.Thread(target=lambda: _datapoint(url, stuck, timeout=60), daemon=True)
        blocked.start()
        blocked.join(2)  # the stuck request is now inside the epoch's build (or refused the FIFO already)
        status, body = _datapoint(url, good, idx=3, timeout=20)
        assert status == 200 and "layer3_energy" in body
        release = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK) if blocked.is_alive() else None
        if release is not None:
            os.close(release)
        blocked.join(30)
        assert not blocked.is_alive()


@pytest.mark.parametrize("damage", [*INDEX_DAMAGES, "unindexed_garbage_page"])
def test_a_malformed_index_or_bad_unindexed_page_is_shown_in_place(trained_run, tmp_path, damage):
    logs = str(tmp_path / "logs")
    good, bad = _copy(trained_run, logs, "good"), _copy(trained_run, logs, "bad")
    debugger_dir = os.path.join(bad, EPOCH, "debugger")
    index_path = os.path.join(debugger_dir, "index.json")
    if damage in INDEX_DAMAGES:
        damage_index(index_path, damage)
    else:
        with open(os.path.join(debugger_dir, "page_999.pkl"), "wb") as f:
            f.write(b"\x80\x05not a page at all")
    with serve_viewer([logs]) as url:
        status, body = _datapoint(url, bad)
        assert status == 200, body
        if damage == "unindexed_garbage_page":  # a complete epoch is what its index lists: the stray file is ignored
            assert "layer3_energy" in body
        else:
            assert "Debug Outputs" in body and "cannot be" in body and "rerun this epoch" in body.lower()
        status, body = _table(url, bad)
        assert status == 200, body
        assert json.loads(body)["response"][ids.TABLE]["getRowsResponse"]["rowCount"] == 8  # scores still listed
        status, body = _datapoint(url, good)
        assert status == 200 and "layer3_energy" in body
