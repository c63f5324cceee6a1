"""Each name of a run's files is written once, in ``run_dir.names``: no other source module spells one out (a copy
would drift from the one the runners write by)."""

from __future__ import annotations

import ast
import pathlib
import re

from run_dir import names

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCES = ("analysis", "benchmarks", "configs", "criteria", "data", "debuggers", "docs", "metrics", "models",
           "runners", "utils")
# a file name, unmistakable wherever it is written
FILE_NAMES = {value for name, value in vars(names).items() if name.isupper() and isinstance(value, str)
              and "." in value and "*" not in value}
# words that also name config keys and index fields ("debugger", "datapoints"): a folder only inside a path
FOLDER_NAMES = {names.DEBUGGER_DIR, names.DATAPOINTS_DIR}
# an epoch folder's name, its start in an f-string, a glob or a pattern of it: epoch_3, f"epoch_{n}", epoch_*
EPOCH_NAME = re.compile(re.escape(names.epoch_dir_name("")) + r"(\d*|\*|N|\(.*|\\d.*)")


def spelled_out(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` where ``source`` spells out a run's file name, an epoch folder's name, or a folder's name
    in a path."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                node.value in FILE_NAMES or EPOCH_NAME.fullmatch(node.value)):
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "os.path.join":
            found += [(arg.lineno, arg.value) for arg in node.args
                      if isinstance(arg, ast.Constant) and arg.value in FOLDER_NAMES]
    return sorted(found)


def test_no_module_outside_run_dir_spells_out_a_run_file_name():
    paths = [path for package in SOURCES for path in sorted((ROOT / package).rglob("*.py"))] + [ROOT / "main.py"]
    found = [f"{path.relative_to(ROOT)}:{line}: {text!r}" for path in paths
             for line, text in spelled_out(path.read_text())]
    assert not found, "run file names written outside run_dir.names:\n" + "\n".join(found)


def test_the_check_sees_a_name_spelled_out():
    source = ('import os\nos.path.join(run, "epoch_table.parquet")\nos.path.join(run, f"epoch_{n}", "debugger")\n'
              'config.get("debugger")\nre.fullmatch(r"epoch_(\\d+)", name)\nrow["epoch_loss"]\n')
    assert spelled_out(source) == [(2, "epoch_table.parquet"), (3, "debugger"), (3, "epoch_"), (5, r"epoch_(\d+)")]
