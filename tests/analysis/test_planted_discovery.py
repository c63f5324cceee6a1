"""On a small run with planted causes of failure, each cause is in the top 3 of its finding list."""

from __future__ import annotations

import pytest

from analysis.failures import analyze
from benchmarks.failure_discovery import TARGET, discovery_ranks

pytestmark = pytest.mark.timeout(600)


def test_every_planted_cause_ranks_in_the_top_3(planted_run):
    findings = analyze(planted_run["work_dir"])
    ranks = discovery_ranks(findings, planted_run)
    missed = {cause: rank for cause, rank in ranks.items() if rank is None or rank > TARGET}
    assert not missed, f"ranks {ranks}; slices: {[s.description for s in findings.slices]}"
