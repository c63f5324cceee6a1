"""No restatements: on a million datapoints, one cause with many correlated descriptions is one finding, in its best
words, its other descriptions under it.

The issue measured slices #1-#9 of a million-row table restating ``site = C`` in different words: on so many rows,
each slightly different description adds a significant sliver of failures to the one before.
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis.failures import analyze_table
from tests.analysis.tables import classified, write_table

pytestmark = pytest.mark.timeout(600)
ROWS = 1_000_000


def test_a_cause_with_many_descriptions_is_one_finding_on_a_million_rows(tmp_path):
    """Site C fails 40%, the rest 5%. ``region`` is 'south' at site C and at a tenth of site D; ``altitude`` is high
    at site C; eight summaries of one layer are shifted at site C, and ``probe.depth`` at a tenth of site C's
    datapoints as well; ``lot`` is noise."""
    rng = np.random.default_rng(3)
    site = rng.choice(np.array(list("ABCD"), dtype=object), ROWS)
    at_c = site == "C"
    failed = rng.random(ROWS) < np.where(at_c, 0.4, 0.05)
    region = np.where(at_c | ((site == "D") & (rng.random(ROWS) < 0.1)), "south", "north").astype(object)
    meta = {"site": site, "region": region, "altitude": rng.normal(size=ROWS) + 3 * at_c,
            "lot": rng.integers(0, 40, ROWS)}
    summaries = {f"layer.{name}": (rng.normal(size=ROWS) + 1.5 * at_c).astype(np.float32)
                 for name in ("mean", "std", "l1_norm", "l2_norm", "max", "min", "sparsity", "positive_ratio")}
    columns = classified(rng, failed) | meta | summaries
    findings = analyze_table(write_table(tmp_path / "epoch_table.parquet", columns, list(meta), {"accuracy": True},
                                         tuple(summaries)))
    assert len(findings.meta.slices) == 1, [s.description for s in findings.meta.slices]
    (found,) = findings.meta.slices
    rows = np.zeros(ROWS, dtype=bool)
    rows[found.idx] = True
    assert (rows & at_c).sum() / (rows | at_c).sum() > 0.9  # site C, in whichever words are best
    assert not findings.internals.slices, [s.description for s in findings.internals.slices]
    assert found.inside_model  # the layer's view of it, under it
    assert not any("lot" in text for text in [found.description, *found.also])
