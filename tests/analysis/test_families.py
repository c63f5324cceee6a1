"""Meta info first, internals explained in meta terms, and a family of per-unit columns counted once.

The issue's independent project: a cause carried by a numeric meta field showed up only as a threshold on one
channel of a per-channel summary, the meta column ranking 25th of 29 separating quantities behind 24 channels of
one debugger.
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis.columns import merge_near_identical, unit_family
from analysis.failures import analyze_table
from analysis.findings import Condition
from analysis.slices import condition_weights
from tests.analysis.tables import classified, write_table

ROWS = 3000
CHANNELS = 24


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    """Failures rise smoothly as ``dose`` falls below 0.3; 24 channels of ``probe`` follow the dose more sharply
    than the failures do (each a noisy copy of it), ``other.c0..c3`` and ``batch`` are noise."""
    rng = np.random.default_rng(11)
    dose = rng.random(ROWS)
    failed = rng.random(ROWS) < np.clip(0.9 - 3 * dose, 0.04, 0.9)
    channels = {f"probe.c{j}": (dose + rng.normal(0, 0.05, ROWS)).astype(np.float32) for j in range(CHANNELS)}
    noise = {f"other.c{j}": rng.normal(size=ROWS).astype(np.float32) for j in range(4)}
    meta = {"dose": dose, "batch": rng.integers(0, 20, ROWS)}
    columns = classified(rng, failed) | meta | channels | noise
    table = write_table(tmp_path_factory.mktemp("proxied") / "epoch_table.parquet", columns, list(meta),
                        {"accuracy": True}, tuple(channels) + tuple(noise), layers={"probe": "backbone.layer3"})
    return analyze_table(table), dose, failed


def test_the_meta_cause_ranks_first_in_its_family_and_the_channels_count_once(proxied):
    findings, dose, failed = proxied
    assert findings.meta.separators[0].column == "dose"
    assert findings.meta.slices[0].conditions[0].column == "dose"
    assert not any(c.column == "batch" for s in findings.meta.slices for c in s.conditions)
    (family,) = findings.internals.separators  # the 24 channels are one quantity; other.* separates nothing
    assert family.column == "probe.c*" and family.family_size == CHANNELS
    assert 1 <= len(family.units) <= 3 and all(u.column.startswith("probe.c") for u in family.units)
    assert family.auroc == pytest.approx(family.units[0].auroc)
    assert findings.internals.separators_tested == 2  # two families, not 28 columns


def test_an_internal_finding_is_explained_by_the_meta_condition_that_matches_its_rows(proxied):
    """The channel family's failure side ("low in failures") is described by ``dose < t``, with its coverage and
    purity, and its target names the layer and the units to intervene on."""
    findings, dose, failed = proxied
    (family,) = findings.internals.separators
    (condition,) = family.meta_match.conditions
    assert (condition.column, condition.op) == ("dose", "<") and family.meta_match.coverage > 0.8
    assert family.target.layer == "backbone.layer3" and family.target.debugger == "probe"
    assert family.target.units == sorted(int(u.column.rsplit("c", 1)[1]) for u in family.units)
    assert family.target.conditions == family.meta_match.conditions
    for found in findings.internals.slices:  # any slice on the channels left is explained by the dose too
        assert found.meta_match is not None and found.meta_match.conditions[0].column == "dose"


def test_each_family_gets_one_share_of_the_level_whatever_its_size():
    """Weighted Bonferroni: the shares sum to 1; a family of 24 columns gets what one column gets."""
    conditions = [Condition("dose", "<", 0.1), Condition("dose", ">=", 0.1)]
    conditions += [Condition(f"probe.c{j}", op, 0.5) for j in range(CHANNELS) for op in ("<", ">=")]
    families = {f"probe.c{j}": "probe.c*" for j in range(CHANNELS)}
    weights = condition_weights(conditions, families)
    assert weights.sum() == pytest.approx(1.0)
    assert weights[:2].sum() == pytest.approx(0.5) and weights[2:].sum() == pytest.approx(0.5)


def test_near_identical_units_merge_into_the_first_and_distinct_ones_stay():
    rng = np.random.default_rng(2)
    base = rng.normal(size=1000)
    columns = {"e.c0": base, "e.c1": 3 * base + 1, "e.c2": np.exp(base), "e.c3": rng.normal(size=1000)}
    kept, same_as = merge_near_identical(columns, {name: "e.c*" for name in columns})
    assert list(kept) == ["e.c0", "e.c3"] and same_as == {"e.c0": ["e.c1", "e.c2"]}
    assert unit_family("layer3_energy.c12") == "layer3_energy.c*" and unit_family("gradcam.spread") is None


def test_an_internal_slice_no_meta_column_describes_shows_its_most_typical_failures(tmp_path):
    """5% of the datapoints (an input artifact, no meta column) drive a probe low and fail 90%: the slice on the
    probe says "no meta column describes it" and names the failing datapoints furthest past its threshold."""
    rng = np.random.default_rng(8)
    rows = 2000
    marked = rng.random(rows) < 0.05
    failed = rng.random(rows) < np.where(marked, 0.9, 0.08)
    probe = (rng.normal(size=rows) - 3 * marked).astype(np.float32)
    meta = {"site": rng.choice(["a", "b", "c"], rows).astype(object), "dose": rng.random(rows)}
    columns = classified(rng, failed) | meta | {"probe.low": probe}
    findings = analyze_table(write_table(tmp_path / "epoch_table.parquet", columns, list(meta), {"accuracy": True},
                                         ("probe.low",)))
    (found,) = findings.internals.slices
    assert found.meta_match is None and found.conditions[0].op == "<" and not findings.meta.slices
    inside = np.isin(np.arange(rows), found.idx) & failed
    expected = np.flatnonzero(inside)[np.argsort(probe[inside], kind="stable")][:5]
    assert found.examples == expected.tolist() and found.target.debugger == "probe"
