"""Each validation epoch's findings are computed off the training thread and stored beside the epoch's other files,
so the Failures tab draws at once; a failing or missing analysis costs the run nothing, and the tab computes the
findings itself, saying why."""

from __future__ import annotations

import json
import logging
import os
import shutil

import pytest

from analysis.failures import analyze
from analysis.findings import load_findings
from run_dir.findings_file import epoch_signature
from run_dir.names import FINDINGS_FILE
from runners import findings_worker
from runners.eval_viewer.shared.findings import epoch_findings
from runners.findings_worker import BackgroundFindings
from tests.runs import train, write_config

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny real run of 3 epochs, its findings stored by the trainer."""
    folder = tmp_path_factory.mktemp("findings_run")
    return train(write_config(folder / "run.py", folder / "run", epochs=3, val_size=40))


def epoch_copy(run: str, tmp_path, epoch: int = 2) -> str:
    """A copy of one epoch folder without its stored findings."""
    copy = shutil.copytree(os.path.join(run, f"epoch_{epoch}"), tmp_path / f"epoch_{epoch}")
    os.remove(copy / FINDINGS_FILE)
    return str(copy)


def test_the_trainer_stores_every_validation_epochs_findings(run):
    for epoch in range(3):
        epoch_dir = os.path.join(run, f"epoch_{epoch}")
        stored = load_findings(epoch_dir)
        assert stored is not None and stored.to_dict() == analyze(run, epoch).to_dict()
    log = open(os.path.join(run, "train.log")).read()
    assert log.count("findings of") == 3 and log.count("stored") >= 3


def test_failure_analysis_false_stores_none(tmp_path):
    work_dir = train(write_config(tmp_path / "run.py", tmp_path / "run", epochs=1, val_size=20,
                                  extra="config['failure_analysis'] = False"))
    assert not os.path.exists(os.path.join(work_dir, "epoch_0", FINDINGS_FILE))


@pytest.mark.parametrize("apart", [pytest.param(False, id="in a thread"),
                                   pytest.param(True, id="in a process", marks=pytest.mark.slow)])
def test_an_epoch_is_analysed_in_a_thread_or_apart_and_its_findings_stored(run, tmp_path, monkeypatch, caplog,
                                                                           apart):
    """Small epochs in a thread of the training process, large ones (here: any) in a separate process."""
    if apart:
        monkeypatch.setattr(findings_worker, "IN_PROCESS_ROWS", 0)
    epoch_dir = epoch_copy(run, tmp_path)
    worker = BackgroundFindings(logging.getLogger("test-findings"))
    with caplog.at_level(logging.INFO, "test-findings"):
        worker.submit(epoch_dir)
        worker.close()
    stored = load_findings(epoch_dir)
    assert stored is not None and stored.to_dict() == analyze(epoch_dir).to_dict()
    assert f"findings of {epoch_dir} stored" in caplog.text


@pytest.mark.parametrize("apart", [pytest.param(False, id="in a thread"),
                                   pytest.param(True, id="in a process", marks=pytest.mark.slow)])
def test_an_analysis_that_fails_leaves_the_epoch_as_it_was_and_says_so(run, tmp_path, monkeypatch, caplog, apart):
    """A table the analysis refuses (labels rewritten as text): a warning naming why, no findings file, every other
    file of the epoch untouched; the tab then computes the findings and says they were not stored."""
    if apart:
        monkeypatch.setattr(findings_worker, "IN_PROCESS_ROWS", 0)
    epoch_dir = epoch_copy(run, tmp_path)
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pq.read_table(os.path.join(epoch_dir, "epoch_table.parquet"))
    table = table.set_column(table.column_names.index("label"), "label",
                             pa.array([str(v) for v in table.column("label").to_pylist()]))
    pq.write_table(table, os.path.join(epoch_dir, "epoch_table.parquet"))
    before = sorted(os.listdir(epoch_dir))
    worker = BackgroundFindings(logging.getLogger("test-findings"))
    with caplog.at_level(logging.INFO, "test-findings"):
        worker.submit(epoch_dir)
        worker.close()
    assert sorted(os.listdir(epoch_dir)) == before and FINDINGS_FILE not in before
    assert "the failure analysis of" in caplog.text and "column 'label' is string, not class numbers" in caplog.text


def test_the_tab_computes_findings_that_are_missing_damaged_or_stale_and_says_why(run, tmp_path):
    epoch_dir = epoch_copy(run, tmp_path)
    assert "computed now: none were stored" in epoch_findings(epoch_dir).notes[0]
    with open(os.path.join(epoch_dir, FINDINGS_FILE), "w") as f:
        f.write('{"format": 1, "table": [1, 2], "findings": {"broken": ')
    assert "could not be read" in epoch_findings(epoch_dir).notes[0]
    shutil.copy(os.path.join(run, "epoch_2", FINDINGS_FILE), os.path.join(epoch_dir, FINDINGS_FILE))
    os.utime(os.path.join(epoch_dir, "epoch_table.parquet"), ns=(1, 1))  # as if rewritten since
    assert "of an earlier version of the epoch's table" in epoch_findings(epoch_dir).notes[0]
    shutil.copy(os.path.join(run, "epoch_2", "epoch_table.parquet"), os.path.join(epoch_dir, "epoch_table.parquet"))
    os.utime(os.path.join(epoch_dir, "epoch_table.parquet"),
             ns=(0, os.stat(os.path.join(run, "epoch_2", "epoch_table.parquet")).st_mtime_ns))
    assert epoch_findings(epoch_dir).to_dict() == analyze(os.path.join(run, "epoch_2")).to_dict()  # read back


def test_a_crafted_findings_file_is_refused_field_by_field(run, tmp_path):
    """A findings file is data: a field of the wrong type is refused (and the tab computes instead)."""
    epoch_dir = epoch_copy(run, tmp_path)
    with open(os.path.join(run, "epoch_2", FINDINGS_FILE)) as f:
        stored = json.load(f)
    stored["inputs"] = epoch_signature(epoch_dir)
    stored["findings"]["failures"] = "many"
    with open(os.path.join(epoch_dir, FINDINGS_FILE), "w") as f:
        json.dump(stored, f)
    notes = epoch_findings(epoch_dir).notes
    assert "could not be read (findings.failures is not an integer)" in notes[0]
