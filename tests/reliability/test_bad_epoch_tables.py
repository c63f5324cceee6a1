"""Epoch tables that no validation writes are refused by ``runners.analyze`` with exit status 2 and one line naming
the problem: an empty table (a 32-line sklearn traceback before), idx repeated (a table whose idx were all 0 was
analysed, its label errors listing idx 0 with different labels) and labels outside the class range (2**62 was
accepted without a word)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from analysis.epoch_table import write_epoch_table
from runners.analyze import main
from tests.runs import REPO_ROOT

ROWS, CLASSES = 80, 3
ROLES = {"scores": ["accuracy"], "higher_is_better": {"accuracy": True}, "meta": ["site"]}


def columns(with_probabilities: bool = True) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    label = rng.integers(0, CLASSES, ROWS)
    table = {"idx": np.arange(ROWS), "label": label, "prediction": (label + (rng.random(ROWS) < 0.3)) % CLASSES,
             "accuracy": rng.random(ROWS).round(), "site": rng.choice(["a", "b"], ROWS).astype(object)}
    if with_probabilities:
        table["probabilities"] = rng.dirichlet(np.ones(CLASSES), ROWS).astype(np.float32)
    return table


def crafted(kind: str) -> tuple[dict[str, np.ndarray], str]:
    """The table's columns and the part of the one-line message that names what is wrong."""
    table = columns(kind != "huge label, no probabilities")
    if kind == "empty":
        return {name: values[:0] for name, values in table.items()}, "has no rows"
    if kind == "all idx equal":
        table["idx"] = np.zeros(ROWS, dtype=np.int64)
        return table, "column 'idx' repeats 1 dataset indices (idx 0)"
    if kind == "two idx repeated":
        table["idx"][[10, 20]] = [3, 5]
        return table, "column 'idx' repeats 2 dataset indices (idx 3, 5)"
    if kind == "label 2**62":
        table["label"][7] = 2 ** 62
        return table, f"1 labels outside the class range 0..{CLASSES - 1} (idx 7: {2 ** 62})"
    if kind == "negative label":
        table["label"][9] = -1
        return table, f"1 labels outside the class range 0..{CLASSES - 1} (idx 9: -1)"
    table["label"][2] = 2 ** 62
    return table, f"1 labels outside the class range 0..999999 (idx 2: {2 ** 62})"


KINDS = ["empty", "all idx equal", "two idx repeated", "label 2**62", "negative label", "huge label, no probabilities"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_table_is_refused_with_one_line(tmp_path, kind, capsys):
    table, expected = crafted(kind)
    write_epoch_table(str(tmp_path / "epoch_table.parquet"), table, ROLES)
    assert main(["--run", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and captured.err.startswith("error: ")
    assert expected in captured.err


def test_a_good_table_of_the_same_shape_is_analysed(tmp_path, capsys):
    """The checks refuse only what is wrong: the same table untouched gives findings."""
    write_epoch_table(str(tmp_path / "epoch_table.parquet"), columns(), ROLES)
    assert main(["--run", str(tmp_path)]) == 0
    assert f"of {ROWS} datapoints" in capsys.readouterr().out


def test_the_empty_table_ends_the_command_with_exit_status_2(tmp_path):
    table, _ = crafted("empty")
    write_epoch_table(str(tmp_path / "epoch_table.parquet"), table, ROLES)
    done = subprocess.run([sys.executable, "-m", "runners.analyze", "--run", str(tmp_path)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
