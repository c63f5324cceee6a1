"""Crafted run folders against the HTML export: what cannot be read or drawn is an alert in the report,
never a traceback, and the other datapoints are still exported."""

from __future__ import annotations

import json
import os
import threading

import joblib
import numpy as np
import pytest

from debuggers.pages.writer import PageWriter
from runners.eval_viewer.export.__main__ import main
from tests.reliability.crafted_index import INDEX_DAMAGES, TouchMarker, damage_index

pytestmark = pytest.mark.timeout(60)


def write_pages(run_dir, outputs_by_idx):
    """An evaluator-style run folder whose ``debugger/`` pages hold ``outputs_by_idx``, through the public
    page-writing API (one page per datapoint)."""
    with PageWriter(page_size_bytes=1) as writer:
        writer.start_epoch(os.path.join(run_dir, "debugger"))
        for idx, outputs in outputs_by_idx.items():
            writer.add(idx, outputs)
        writer.flush()
    return str(run_dir)


def export(run_dir, tmp_path, capsys, *indices):
    out = tmp_path / "report.html"
    code = main(["--run", run_dir, "--out", str(out), "--idx", *map(str, indices)])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, out.read_text() if out.exists() else "", captured.err


def test_a_valid_page_holding_an_empty_array_is_exported(tmp_path, capsys):
    run_dir = write_pages(tmp_path / "run", {0: {"empty": {"maps": np.zeros((0, 3, 3), np.float32)}},
                                             1: {"empty": {"maps": np.ones((2, 3, 3), np.float32)}}})
    code, page, err = export(run_dir, tmp_path, capsys, 0, 1)
    assert code == 0, err
    assert "Datapoint 0" in page and "Datapoint 1" in page and "empty array of shape [0, 3, 3]" in page


@pytest.mark.parametrize("damage", INDEX_DAMAGES)
def test_a_malformed_index_becomes_an_alert_in_the_report(tmp_path, capsys, damage):
    run_dir = write_pages(tmp_path / "run", {0: {"values": np.arange(4.0)}, 1: {"values": np.arange(4.0)}})
    index_path = os.path.join(run_dir, "debugger", "index.json")
    damage_index(index_path, damage)
    code, page, err = export(run_dir, tmp_path, capsys, 0, 1)
    assert code == 0, err
    assert "Datapoint 0" in page and "Datapoint 1" in page
    assert page.count('<div class="alert">the debug outputs in ') == 2


def test_a_folder_of_pylon_pickles_is_an_alert_saying_how_to_convert_it_and_is_never_opened(tmp_path, capsys):
    debugger_dir = tmp_path / "run" / "debugger"
    debugger_dir.mkdir(parents=True)
    marker = tmp_path / "ran"
    joblib.dump({0: {"x": TouchMarker(str(marker))}, 1: {"x": 1}}, debugger_dir / "page_0.pkl")
    code, page, err = export(str(tmp_path / "run"), tmp_path, capsys, 0, 1)
    assert code == 0, err
    assert page.count("is a folder of Pylon/joblib pickles") == 2
    assert page.count(f"python -m debuggers.pages.convert {debugger_dir} --trust-pickles") == 2
    assert not marker.exists()


def _in_thread(call, fifo, seconds=30):
    """``call()`` in a thread; fails (after opening ``fifo`` to release it) when it is still blocked."""
    outcome = []
    thread = threading.Thread(target=lambda: outcome.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"still blocked after {seconds} s on the FIFO {fifo}")
    return outcome[0]


@pytest.mark.parametrize("report", ["fifo", "not_json", "layers_a_number"])
def test_an_unreadable_model_report_is_an_alert_and_never_blocks(tmp_path, capsys, report):
    run_dir = write_pages(tmp_path / "run", {0: {"values": np.arange(4.0)}})
    path = os.path.join(run_dir, "model_report.json")
    if report == "fifo":
        os.mkfifo(path)
    else:
        with open(path, "w") as f:
            f.write("not json" if report == "not_json" else json.dumps({"layers": 5}))
    code, page, err = _in_thread(lambda: export(run_dir, tmp_path, capsys, 0), path)
    assert code == 0, err
    assert '<div class="alert">model_report.json of the run cannot be read (' in page and path in page
    assert "Datapoint 0" in page


def test_a_fifo_run_info_never_blocks_the_export(tmp_path, capsys):
    run_dir = write_pages(tmp_path / "run", {0: {"values": np.arange(4.0)}})
    os.mkfifo(os.path.join(run_dir, "run_info.json"))
    code, page, err = _in_thread(lambda: export(run_dir, tmp_path, capsys, 0), os.path.join(run_dir, "run_info.json"))
    assert code == 0, err
    assert "Datapoint 0" in page


def test_a_linked_epoch_folder_is_refused_naming_the_link(tmp_path, capsys):
    outside = write_pages(tmp_path / "outside", {0: {"values": np.arange(4.0)}})
    link = str(tmp_path / "run" / "epoch_3")
    os.makedirs(tmp_path / "run")
    os.symlink(outside, link)
    code, page, err = export(str(tmp_path / "run"), tmp_path, capsys, 0)
    assert code == 2 and not page
    assert f"{link} is a symbolic link (to {outside}); Lantern never writes links in a run folder" in err


@pytest.mark.parametrize("damage", [("datapoint_idx", "abc"), ("per_datapoint", "x")])
def test_a_malformed_scores_file_is_a_note_in_the_report(tmp_path, capsys, damage):
    run_dir = write_pages(tmp_path / "run", {0: {"values": np.arange(4.0)}, 1: {"values": np.arange(4.0)}})
    with open(os.path.join(run_dir, "run_info.json"), "w") as f:
        json.dump({"runner": "BaseEvaluator"}, f)
    scores = {"aggregated": {"loss": 1.0}, "per_datapoint": {"loss": [1.0, 1.0]}, "datapoint_idx": [0, 1],
              "higher_is_better": {"loss": False}}
    key, value = damage
    (scores["datapoint_idx"] if key == "datapoint_idx" else scores["per_datapoint"]["loss"])[1] = value
    path = os.path.join(run_dir, "evaluation_scores.json")
    with open(path, "w") as f:
        json.dump(scores, f)
    code, page, err = export(run_dir, tmp_path, capsys, 0, 1)
    assert code == 0, err
    assert f"scores unavailable: {path}: " in page and "rerun the epoch" in page
    assert "Datapoint 0" in page and "Datapoint 1" in page
