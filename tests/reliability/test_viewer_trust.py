"""Crafted run folders against a real viewer server: one bad run never blocks the others, and what is broken
shows as a message in place of the part it breaks (never an HTTP 500 for the whole epoch)."""

from __future__ import annotations

import json
import os
import shutil
import threading

import joblib
import pytest

from debuggers.pages import encoding
from debuggers.pages.writer import PageWriter
from run_dir.folder import MAX_RUN_INFO_BYTES
from run_dir.names import REMOVED_MARKER
from runners.config_file import load_config
from runners.eval_viewer.controls.ids import EPOCH_SELECT, RUN_SELECT
from runners.eval_viewer.datapoint.ids import DATAPOINT_PANEL, TAB_DATAPOINT
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.datapoint import load_datapoint
from runners.eval_viewer.shared.ids import SELECTED, TABS
from runners.eval_viewer.shared.table import TABLE_ERRORS
from runners.eval_viewer.table.ids import TABLE, TABLE_QUERY, TABLE_ROWS
from runners.trainers import BaseTrainer
from tests.reliability.crafted_index import (
    INDEX_DAMAGES,
    LOCATION_DAMAGES,
    TouchMarker,
    damage_debug_files,
    damage_index,
)
from tests.reliability.viewer_server import HTTP_WAIT_S, call_callback, serve_viewer
from tests.runs import write_config

pytestmark = pytest.mark.timeout(400)

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


def _datapoint(url, run_path, idx=0):
    return call_callback(url, f"{DATAPOINT_PANEL}.children", {
        f"{SELECTED}.data": idx, f"{RUN_SELECT}.value": run_path, f"{EPOCH_SELECT}.value": EPOCH,
        f"{TABS}.value": TAB_DATAPOINT})


def _table(url, run_path):
    """The first rows of the epoch's table, as the grid asks for them."""
    query = {"run": run_path, "epoch": EPOCH, "metric": "cross_entropy", "version": None, "idx": None}
    return call_callback(url, f"{TABLE_ROWS}.data", {
        f"{TABLE}.getRowsRequest": {"startRow": 0, "endRow": 100}, f"{TABLE_QUERY}.data": query})


def test_a_page_that_blocks_forever_does_not_block_other_runs(trained_run, tmp_path):
    """A FIFO named like an unindexed page blocks whoever opens it; requests for other runs must still be
    answered (the epoch view is built outside the shared cache lock)."""
    logs = str(tmp_path / "logs")
    good, stuck = _copy(trained_run, logs, "good"), _copy(trained_run, logs, "stuck")
    fifo = os.path.join(stuck, EPOCH, "debugger", "page_999.pkl")
    os.mkfifo(fifo)
    with serve_viewer([logs]) as url:
        blocked = threading.Thread(target=lambda: _datapoint(url, stuck), daemon=True)
        blocked.start()
        # a head start (the request for the good run does not depend on it): the stuck request is then inside the
        # epoch's build, or has refused the FIFO already (pages are opened non-blocking)
        blocked.join(2)
        status, body = _datapoint(url, good, idx=3)
        assert status == 200 and "layer3_energy" in body
        release = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK) if blocked.is_alive() else None
        if release is not None:
            os.close(release)
        blocked.join(HTTP_WAIT_S)
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
        assert json.loads(body)["response"][TABLE_ROWS]["data"]["rowCount"] == 8  # scores still listed
        status, body = _datapoint(url, good)
        assert status == 200 and "layer3_energy" in body


def _within_seconds(call, fifos=(), seconds=HTTP_WAIT_S):
    """``call()`` run in a thread: its value, or a failure when it is still blocked after ``seconds`` (a FIFO
    blocks whoever opens it for reading until a writer comes: the FIFOs are then opened to release it)."""
    outcome = {}

    def target():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        for fifo in fifos:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"still blocked after {seconds} s: a FIFO was opened")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@pytest.mark.parametrize("kind", ["fifo", "link_to_a_fifo", "larger_than_the_cap"])
def test_a_run_info_that_is_a_fifo_or_huge_is_a_problem_and_the_other_runs_open(trained_run, tmp_path, kind):
    """Discovery reads every run's run_info.json at start-up: a FIFO there blocked the viewer (and the export)
    forever, and a sparse 3 GB one cost 22 s and 6 GB; now each is refused at once, naming the file."""
    logs = str(tmp_path / "logs")
    good, bad = _copy(trained_run, logs, "good"), _copy(trained_run, logs, "bad")
    info = os.path.join(bad, "run_info.json")
    fifo = str(tmp_path / "outside_fifo") if kind == "link_to_a_fifo" else info
    if kind == "larger_than_the_cap":  # valid JSON, so only the cap refuses it
        with open(info) as f:
            content = json.load(f)
        with open(info, "w") as f:
            json.dump({**content, "padding": "x" * MAX_RUN_INFO_BYTES}, f)
    else:
        os.remove(info)
        os.mkfifo(fifo)
        if fifo != info:
            os.symlink(fifo, info)
    backend = _within_seconds(lambda: ViewerBackend([logs]), fifos=[fifo])
    assert list(backend.discovery.runs) == [good]
    assert [p for p in backend.discovery.problems if p.startswith(f"{info} cannot be read (run info file {info} ")]


LINKED = {"debugger": os.path.join(EPOCH, "debugger"), "epoch": EPOCH, "datapoints": "datapoints",
          "table": os.path.join(EPOCH, "epoch_table.parquet"), "scores": os.path.join(EPOCH, "validation_scores.json")}


@pytest.mark.parametrize("linked", LINKED)
def test_a_link_in_a_run_folder_is_refused_naming_it_never_followed(trained_run, tmp_path, linked):
    """Each part of a run moved outside it and linked back: nothing is read through the link (the scores file's
    link showed the outside file's scores as the epoch's), and the message names the link."""
    run = _copy(trained_run, str(tmp_path / "logs"), "run")
    if linked == "scores":  # the scores file is read where the epoch has no table
        os.remove(os.path.join(run, EPOCH, "epoch_table.parquet"))
    link = os.path.join(run, LINKED[linked])
    shutil.move(link, tmp_path / "outside")
    os.symlink(tmp_path / "outside", link)
    backend = ViewerBackend([str(tmp_path / "logs")])
    runner = backend.run(run)
    refusal = f"{link} is a symbolic link (to {tmp_path / 'outside'}); Lantern never writes links in a run folder"
    if linked == "epoch":
        assert backend.epochs(runner) == [] and [p for p in backend.discovery.problems if refusal in p]
        return
    datapoint = load_datapoint(backend, runner, backend.epoch(runner, EPOCH), 3)
    shown = {"debugger": "debug_error", "datapoints": "dataset_error"}.get(linked, "scores_error")
    assert refusal in datapoint[shown] or (linked == "scores" and "is a symlink" in datapoint[shown])
    if linked in ("table", "scores"):  # no score of the outside file is shown, the chart's included
        assert not datapoint["scores"] and not _aggregated(backend, backend.epoch(runner, EPOCH))


def _aggregated(backend, epoch):
    """The epoch's point on the chart over epochs ({} where the chart shows none: ``scores/data.py``)."""
    try:
        return backend.aggregated(epoch)
    except TABLE_ERRORS:
        return {}


@pytest.mark.parametrize("marker", ["budget_beyond_a_float", "fifo"])
def test_a_bad_removal_marker_changes_only_its_epoch_s_note(trained_run, tmp_path, marker):
    run = _copy(trained_run, str(tmp_path / "logs"), "run")
    shutil.rmtree(os.path.join(run, EPOCH, "debugger"))
    path = os.path.join(run, EPOCH, REMOVED_MARKER)
    if marker == "fifo":
        os.mkfifo(path)
    else:
        with open(path, "w") as f:
            json.dump({"budget_gb": 10**400}, f)  # 406 bytes
    backend = ViewerBackend([str(tmp_path / "logs")])
    epochs = _within_seconds(lambda: backend.epochs(backend.run(run)), fifos=[path])
    assert [e.debug_removed for e in epochs] == ["removed to stay under the run's disk budget"]


SCORES_DAMAGES = {"idx_a_string": ("datapoint_idx", "abc"), "score_a_string": ("accuracy", "x"),
                  "idx_beyond_int64": ("datapoint_idx", 10**30), "score_a_list": ("accuracy", [1.0])}


@pytest.mark.parametrize("damage", SCORES_DAMAGES)
def test_a_malformed_scores_file_is_shown_in_place(trained_run, tmp_path, damage):
    logs = str(tmp_path / "logs")
    bad = _copy(trained_run, logs, "bad")
    os.remove(os.path.join(bad, EPOCH, "epoch_table.parquet"))
    path = os.path.join(bad, EPOCH, "validation_scores.json")
    with open(path) as f:
        scores = json.load(f)
    key, value = SCORES_DAMAGES[damage]
    (scores["datapoint_idx"] if key == "datapoint_idx" else scores["per_datapoint"][key])[0] = value
    with open(path, "w") as f:
        json.dump(scores, f)
    with serve_viewer([logs]) as url:
        status, body = _datapoint(url, bad)
        assert status == 200, body
        shown = str(json.loads(body))  # paths unescaped (Dash writes "/" as \u002f)
        assert f"{path}: " in shown and "rerun the epoch" in shown and "layer3_energy" in shown
        status, body = _table(url, bad)
        assert status == 200, body
        assert json.loads(body)["response"][TABLE_ROWS]["data"]["rowCount"] == 8  # the captured idx


def test_a_page_whose_header_is_too_big_to_parse_is_shown_in_place(trained_run, tmp_path, monkeypatch):
    """A valid page whose record header is 400,000 empty lists held the viewer for minutes and took gigabytes:
    that datapoint's debug outputs now say the page is refused, and the others still show."""
    logs = str(tmp_path / "logs")
    bad = _copy(trained_run, logs, "bad")
    debugger_dir = os.path.join(bad, EPOCH, "debugger")
    shutil.rmtree(debugger_dir)
    monkeypatch.setattr(encoding, "MAX_HEADER_NODES", 10**9)  # written by another tool, or an older Lantern
    with PageWriter(2**30) as writer:
        writer.start_epoch(debugger_dir)
        writer.add_converted(list(range(8)), [{"layer3_energy": [[] for _ in range(400_000)] if idx == 0 else
                                               [float(idx)]} for idx in range(8)])
        writer.flush()
    monkeypatch.undo()
    with serve_viewer([logs]) as url:
        status, body = _datapoint(url, bad)
        assert status == 200, body
        assert "Debug Outputs" in body and "has a header made of" in body and "rerun the epoch" in body
        status, body = _datapoint(url, bad, idx=3)
        assert status == 200 and "layer3_energy" in body and "has a header made of" not in body
        status, body = _table(url, bad)
        assert status == 200, body
        assert json.loads(body)["response"][TABLE_ROWS]["data"]["rowCount"] == 8


def test_a_folder_of_pylon_pickles_is_never_opened_and_says_how_to_convert_it(trained_run, tmp_path):
    logs = str(tmp_path / "logs")
    pylon = _copy(trained_run, logs, "pylon")
    debugger_dir = os.path.join(pylon, EPOCH, "debugger")
    shutil.rmtree(debugger_dir)
    os.mkdir(debugger_dir)
    marker = tmp_path / "ran"
    joblib.dump({idx: {"layer3_energy": TouchMarker(str(marker))} for idx in range(8)},
                os.path.join(debugger_dir, "page_0.pkl"))
    with serve_viewer([logs]) as url:
        status, body = _datapoint(url, pylon)
        assert status == 200, body
        shown = str(json.loads(body))
        assert "Debug Outputs" in shown and "is a folder of Pylon/joblib pickles" in shown
        assert f"python -m debuggers.pages.convert {debugger_dir} --trust-pickles" in shown
        assert "Rerun this epoch" not in shown
        status, body = _table(url, pylon)
        assert status == 200, body
        assert json.loads(body)["response"][TABLE_ROWS]["data"]["rowCount"] == 8
    assert not marker.exists()


@pytest.mark.parametrize("damage", LOCATION_DAMAGES)
def test_bad_locations_or_index_numbers_are_shown_in_place(trained_run, tmp_path, damage):
    """The datapoint list of the epoch is read for the table's debug column and to tell a missing datapoint:
    what breaks it is the epoch's debug error, shown in place, never an HTTP 500 for the whole epoch."""
    logs = str(tmp_path / "logs")
    bad = _copy(trained_run, logs, "bad")
    damage_debug_files(os.path.join(bad, EPOCH, "debugger"), damage)
    with serve_viewer([logs]) as url:
        status, body = _datapoint(url, bad)
        assert status == 200, body
        assert "Debug Outputs" in body and ("rerun the epoch" in body or "cannot be read" in body)
        status, body = _table(url, bad)
        assert status == 200, body
        assert json.loads(body)["response"][TABLE_ROWS]["data"]["rowCount"] == 8
