"""The failure analysis's memory stays far below rows x conditions and rows x columns (wide tables: ActivationStats
of many layers give hundreds of summary columns, thousands of conditions).

``tracemalloc`` sees NumPy's allocations; the bounds are on the structure (bytes per row and condition, or the
table's own bytes), never on time. Figures at 100k rows: docs/benchmarks.md, "Failure discovery".
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

from analysis.internals import CapturedInternals
from analysis.meta_terms import MetaVocabulary
from analysis.slices import candidate_conditions, find_slices
from analysis.subgroups import find_subgroups

ROWS, COLUMNS, MIN_SIZE = 20_000, 150, 200


def wide_table(seed: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Float32 summaries all moved by one hidden difficulty (as a network's layers are) and a site; rows at site C
    with a high difficulty fail half the time: many conditions fail more, so the beam keeps many children."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(size=ROWS)
    columns = {f"layer{j}.std": (rng.random() * difficulty + rng.normal(size=ROWS)).astype(np.float32)
               for j in range(COLUMNS)}
    columns["site"] = np.array(["A", "B", "C", "D"], dtype=object)[rng.integers(0, 4, ROWS)]
    hard = (columns["site"] == "C") & (difficulty > 0.8)
    return columns, rng.random(ROWS) < np.where(hard, 0.5, 0.1), difficulty


def traced_peak(call: Callable[[], Any]) -> tuple[Any, int]:
    """``call()`` and the peak bytes it allocated."""
    tracemalloc.start()
    try:
        return call(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_slice_search_holds_under_half_a_byte_per_row_and_condition():
    """A bool mask per condition is one byte per row and condition; the search stacked them and kept a copy of
    the stack per beam member (18 times that here, 17 GB at 100k rows x 600 columns). Packed 8 rows a byte,
    counted a chunk at a time, with only the beam's members holding a mask, it stays under half of it."""
    columns, failed, _ = wide_table()
    conditions = len(candidate_conditions(columns, MIN_SIZE))
    found, peak = traced_peak(lambda: find_slices(columns, failed, np.arange(ROWS), MIN_SIZE))
    assert "site = C" in found[0].description
    assert peak < conditions * ROWS / 2, f"{peak / 2**20:.0f} MB for {conditions} conditions x {ROWS} rows"


def test_finding_and_describing_subgroups_copies_no_column():
    """Each subgroup is described from the meta conditions' packed rows, never from the table's columns (the old
    clusters' description cut a copy of the whole table to the captured rows, once per cluster): what it takes is
    HDBSCAN's own working memory, below one copy of the table."""
    columns, failed, difficulty = wide_table()
    hard = (columns["site"] == "C") & (difficulty > 0.8)  # a blob of its own in the feature space
    vectors = np.random.default_rng(1).normal(size=(ROWS, 2)) + 8 * hard[:, None]
    internals = CapturedInternals({"features": (np.arange(ROWS), vectors)}, [])
    vocabulary = MetaVocabulary({"site": columns["site"]}, MIN_SIZE)
    found, peak = traced_peak(lambda: find_subgroups(internals, np.arange(ROWS), failed, vocabulary, MIN_SIZE, {}, []))
    table = sum(values.nbytes for values in columns.values())
    assert found
    assert peak < table, f"{peak / 2**20:.0f} MB for a table of {table / 2**20:.0f} MB"
