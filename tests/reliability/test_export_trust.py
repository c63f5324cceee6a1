"""Crafted run folders against the HTML export: what cannot be read or drawn is an alert in the report,
never a traceback, and the other datapoints are still exported."""

from __future__ import annotations

import os

import numpy as np
import pytest

from debuggers.page_store import PageWriter
from runners.eval_viewer.export import main
from tests.reliability.crafted_index import INDEX_DAMAGES, damage_index

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
