"""The score grid's numbers: rounded at once as ``float(f"{v:.4g}")`` rounds each (the tooltip shows them so), and
sent to the page as arrays whose JSON, with orjson or the standard library, is the list the page reads."""

from __future__ import annotations

import json

import numpy as np
import plotly.io as pio
import pytest
from dash._utils import to_json

from runners.eval_viewer.scores.data import significant

EDGES = [0.12345, 2.5e-7, 1234.5, 999.95, 0.0009999999, 1e-320, 5e-324, 1.7e308, -0.0, 0.0, 12345678.0, 0.00012345,
         -7.65e-5, 1e22, 3.0e23, np.nan, np.inf, -np.inf]


def _one_by_one(values: np.ndarray) -> np.ndarray:
    return np.array([float(f"{v:.4g}") for v in values.tolist()])


def test_significant_rounds_as_python_formats_each_value():
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.standard_normal(200_000) * 10.0 ** rng.integers(-12, 12, 200_000),
                             rng.integers(0, 100_000, 50_000) / 10.0 ** rng.integers(0, 9, 50_000), EDGES])
    np.testing.assert_array_equal(significant(values), _one_by_one(values))


@pytest.mark.parametrize("engine", ["json", "orjson"])
def test_the_grid_s_arrays_are_sent_as_the_lists_the_page_reads(engine, monkeypatch):
    """Dash encodes with orjson where installed (the ``dev`` extra installs it), else with the standard library."""
    monkeypatch.setattr(pio.json.config, "default_engine", engine)
    values = np.array([0.123456, np.nan, 98765.4321, -1.5e-9])
    sent = json.loads(to_json({"values": significant(values), "idx": np.array([3, 1, 2, -1])}))
    assert sent == {"values": [0.1235, None, 98770.0, -1.5e-9], "idx": [3, 1, 2, -1]}
