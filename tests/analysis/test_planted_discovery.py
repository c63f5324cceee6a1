"""On a small run with planted causes of failure, each cause is found in the top 3 of its list, the command prints
the same findings as the Python function, and the trainer stored the same findings after the last validation
epoch (what the Failures tab reads)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from analysis.failures import Findings, analyze, resolve_epoch_dir
from analysis.findings import load_findings
from benchmarks.failure_discovery import TARGET, evaluate
from benchmarks.planted_benchmarks import planted
from run_dir.names import FINDINGS_FILE
from tests.runs import REPO_ROOT

pytestmark = pytest.mark.timeout(600)


def test_every_planted_cause_is_found_in_the_top_3(planted_run):
    findings = analyze(planted_run["work_dir"])
    result = evaluate(planted(planted_run["work_dir"], small=True), findings, baselines=False)
    missed = [r for r in result["ranks"] if not r.met]
    assert not missed, f"{missed}; meta slices: {[s.description for s in findings.meta.slices]}"
    assert all(rank is not None and rank <= TARGET for rank in result["other"].values()), result["other"]
    ours, plain = result["label precision"]
    assert ours >= plain, (ours, plain)
    assert not result["distractors"]["lantern"]


def section(text: str, title: str) -> str:
    """The command's table under ``title`` (tables are separated by blank lines)."""
    return next(block for block in text.split("\n\n") if block.startswith(title))


def in_order(text: str, parts: list[str]) -> bool:
    """Whether every part occurs in ``text``, each after the one before."""
    position = 0
    for part in parts:
        position = text.find(part, position)
        if position < 0:
            return False
        position += len(part)
    return True


@pytest.mark.slow
def test_the_command_and_the_function_give_the_same_findings(planted_run):
    findings: Findings = analyze(planted_run["work_dir"])
    expected = json.loads(json.dumps(findings.to_dict()))
    assert findings.meta.slices and findings.label_issues and findings.nan_origins and findings.dead_units
    command = [sys.executable, "-m", "runners.analyze", "--run", planted_run["work_dir"]]
    printed = subprocess.run(command + ["--json"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout) == expected

    text = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300).stdout
    assert in_order(section(text, "Meta info (what the data says): slices"),
                    [s.description for s in findings.meta.slices])
    assert in_order(section(text, "Internals (what the model does): separating"),
                    [x for s in findings.internals.separators for x in (s.column, f"{s.auroc:.3f}")])
    assert in_order(section(text, "Suspected"), [str(x) for e in findings.label_issues for x in (e.idx, e.label)])
    assert in_order(section(text, "Restate the failure"), [r.column for r in findings.restatements])
    assert in_order(section(text, "Where NaN"), [o.module for o in findings.nan_origins])
    assert in_order(section(text, "Dead units"), [d.column for d in findings.dead_units])


def test_the_trainer_stored_the_last_epochs_findings_for_the_viewer(planted_run):
    """The background analysis after validation wrote ``findings.json`` beside the table: the same findings, read
    back field by field; a rewritten table makes them stale (not read)."""
    epoch_dir = resolve_epoch_dir(planted_run["work_dir"], None)
    table = os.path.join(epoch_dir, "epoch_table.parquet")
    stored = load_findings(epoch_dir)
    assert stored is not None and os.path.isfile(os.path.join(epoch_dir, FINDINGS_FILE))
    assert stored.to_dict() == analyze(planted_run["work_dir"]).to_dict()
    status = os.stat(table)
    os.utime(table, ns=(status.st_atime_ns, status.st_mtime_ns + 1))  # as if rewritten since
    try:
        assert load_findings(epoch_dir) is None
    finally:
        os.utime(table, ns=(status.st_atime_ns, status.st_mtime_ns))
