"""A table the analysis cannot use gives one line saying what is wrong and what to do, exit status 2 from
``runners.analyze`` and the same message in place of the findings in the viewer's Failures tab: never a traceback.

The issue's crafted tables (float labels holding NaN, a struct column) ended ``runners.analyze`` with a traceback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.epoch_table import ROLES_KEY, write_epoch_table
from runners.analyze import main
from runners.eval_viewer.failures.view import findings_content
from runners.eval_viewer.shared.backend import ViewerBackend
from tests.runs import REPO_ROOT

ROWS = 60
ROLES = {"scores": ["accuracy"], "higher_is_better": {"accuracy": True}, "meta": ["site"]}


def good_columns() -> dict:
    rng = np.random.default_rng(0)
    label = rng.integers(0, 3, ROWS)
    return {"idx": np.arange(ROWS), "label": label, "prediction": (label + (rng.random(ROWS) < 0.2)) % 3,
            "probabilities": rng.dirichlet(np.ones(3), ROWS).astype(np.float32),
            "accuracy": rng.random(ROWS).round(), "site": rng.choice(["a", "b"], ROWS).astype(object)}


def write_arrow(path, columns: dict[str, pa.Array], roles: dict) -> None:
    import json
    table = pa.table(columns).replace_schema_metadata({ROLES_KEY: json.dumps(roles)})
    pq.write_table(table, str(path))


def bad_table(folder, kind: str) -> str:
    """An epoch table at ``folder/epoch_table.parquet`` with one thing wrong; the part of the message naming it."""
    columns = good_columns()
    path = folder / "epoch_table.parquet"
    if kind == "float labels with NaN":
        columns["label"] = columns["label"].astype(np.float64)
        columns["label"][[3, 7]] = np.nan
        write_epoch_table(str(path), columns, ROLES)
        return "column 'label' has 2 values that are no class number (missing or fractional; idx 3, 7)"
    arrow = {name: pa.array(values.tolist() if values.ndim == 2 or values.dtype == object else values)
             for name, values in columns.items()}
    roles = dict(ROLES)
    if kind == "struct column":
        arrow["camera"] = pa.array([{"iso": 100, "lens": "wide"}] * ROWS)
        expected = "column 'camera' holds structs"
    elif kind == "list column":
        arrow["boxes"] = pa.array([[1.0, 2.0]] * ROWS)
        expected = "column 'boxes' holds lists"
    elif kind == "unknown roles":
        roles["targets"] = ["site"]
        expected = "declares roles Lantern does not know (targets)"
    elif kind == "roles naming a missing column":
        roles["meta"] = ["site", "weather"]
        expected = "lists 'weather' as meta but has no such column"
    else:  # probabilities of different lengths
        arrow["probabilities"] = pa.array([[0.5, 0.5]] + [[0.2, 0.3, 0.5]] * (ROWS - 1))
        expected = "holds lists of different lengths"
    write_arrow(path, arrow, roles)
    return expected


KINDS = ["float labels with NaN", "struct column", "list column", "unknown roles", "roles naming a missing column",
         "ragged probabilities"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_table_gives_one_line_and_exit_status_2(tmp_path, kind, capsys):
    expected = bad_table(tmp_path, kind)
    assert main(["--run", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and captured.err.startswith("error: ")
    assert expected in captured.err and "Traceback" not in captured.err


def test_the_command_itself_exits_2_without_a_traceback(tmp_path):
    bad_table(tmp_path, "struct column")
    done = subprocess.run([sys.executable, "-m", "runners.analyze", "--run", str(tmp_path)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize("kind", ["float labels with NaN", "struct column"])
def test_the_failures_tab_shows_the_message_in_place(planted_run, tmp_path, kind):
    """The last epoch of a real run with its table replaced: the tab's content is the message, the charts empty."""
    run = shutil.copytree(planted_run["work_dir"], tmp_path / "logs" / "run")
    last = sorted(name for name in os.listdir(run) if name.startswith("epoch_"))[-1]
    expected = bad_table(run / last, kind)
    backend = ViewerBackend([str(tmp_path / "logs")])
    above, below, *charts = findings_content(backend, str(run), last)
    text = str(above.children)
    assert "failures-error" in above.class_name and expected in text
    assert below == [] and charts == [{}, {}, {}]
