"""Pylon runs: a ``debugger/`` folder of joblib pickles is never opened by the reader, is converted only with
``--trust-pickles``, reads back equal, and a conversion killed at any moment leaves a folder that reads."""

from __future__ import annotations

import logging
import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import joblib
import numpy as np
import pytest
import torch

from analysis.internals import read_internals
from debuggers.pages.convert import main as convert_main
from debuggers.pages.errors import CorruptPageError, PicklePagesError
from debuggers.pages.file_format import write_page
from debuggers.pages.pickle_pages import page_kind
from debuggers.pages.reader import load_debug_outputs
from tests.reliability.crafted_index import TouchMarker
from tests.runs import REPO_ROOT

pytestmark = pytest.mark.timeout(120)


def pylon_outputs(idx: int) -> dict:
    """One datapoint's outputs as the seed's example debuggers return them: tensors, arrays, numbers, text."""
    generator = torch.Generator().manual_seed(idx)
    return {
        "feature_maps": {"feature_map": torch.rand(4, 3, 3, generator=generator), "shape": [4, 3, 3],
                         "stats": {"mean": float(idx) / 3, "std": torch.tensor(0.5 + idx)}},
        "attention": {"weights": np.full((2, 5), idx, np.float32), "entropy": np.float32(idx / 2)},
        "layer": "backbone.layer3", "grad_norms": (1.5, idx, None),
    }


def write_pylon_folder(folder) -> dict[int, dict]:
    """A ``debugger/`` folder as Pylon's ``SequentialDebugger`` writes it: ``joblib.dump`` of a dict
    ``{idx: outputs}`` per page, no index; its documents' later pages are lists of ``(idx, outputs)``. Pages
    are numbered past 9, so that their order is not the names'."""
    os.makedirs(folder)
    pages = {0: range(0, 3), 2: range(3, 6), 10: range(6, 9)}
    for number, indices in pages.items():
        page = {idx: pylon_outputs(idx) for idx in indices}
        joblib.dump(page if number == 0 else list(page.items()), os.path.join(folder, f"page_{number}.pkl"))
    return {idx: pylon_outputs(idx) for indices in pages.values() for idx in indices}


def assert_same(loaded, original) -> None:
    """``loaded`` (read from a converted page) is ``original`` as a page holds it: arrays for tensors, numbers
    for 0-d tensors and NumPy scalars."""
    if isinstance(original, torch.Tensor) and original.dim() > 0:
        original = original.numpy()
    elif isinstance(original, (torch.Tensor, np.generic)):
        original = original.item()
    if isinstance(original, np.ndarray):
        assert type(loaded) is np.ndarray and loaded.dtype == original.dtype
        np.testing.assert_array_equal(loaded, original)
    elif isinstance(original, dict):
        assert list(loaded) == list(original)
        for key, value in original.items():
            assert_same(loaded[key], value)
    elif isinstance(original, (list, tuple)):
        assert type(loaded) is type(original) and len(loaded) == len(original)
        for item, value in zip(loaded, original):
            assert_same(item, value)
    else:
        assert loaded == original and type(loaded) is type(original)


def assert_converted(epoch_dir, original: dict[int, dict]) -> None:
    outputs = load_debug_outputs(str(epoch_dir))
    assert outputs.complete and sorted(outputs) == sorted(original)
    for idx, value in original.items():
        assert_same(outputs[idx], value)


def test_a_pylon_folder_is_refused_with_what_it_is_and_the_command_that_converts_it(tmp_path):
    folder = tmp_path / "debugger"
    write_pylon_folder(folder)
    marker = tmp_path / "ran"
    joblib.dump({99: {"x": TouchMarker(str(marker))}}, folder / "page_11.pkl")
    with pytest.raises(PicklePagesError) as refused:
        load_debug_outputs(str(tmp_path))
    message = str(refused.value)
    assert f"{folder} is a folder of Pylon/joblib pickles" in message
    assert "which Lantern does not open because unpickling runs code" in message
    assert message.endswith(f"python -m debuggers.pages.convert {folder} --trust-pickles")
    problem = read_internals(str(tmp_path)).problem  # the analysis says it too
    assert "Pylon/joblib pickles" in problem and "--trust-pickles" in problem
    assert convert_main([str(folder)]) == 2  # without the flag: refused the same way, nothing changed
    assert sorted(os.listdir(folder)) == ["page_0.pkl", "page_10.pkl", "page_11.pkl", "page_2.pkl"]
    assert not marker.exists() and not (tmp_path / "debugger.converting").exists()


def test_converting_with_trust_pickles_reads_back_equal_and_keeps_the_old_folder(tmp_path, capsys):
    folder = tmp_path / "debugger"
    original = write_pylon_folder(folder)
    assert convert_main([str(folder), "--trust-pickles", "--page-size-mb", "0.001"]) == 0
    assert f"the previous pages are in {folder}.pylon" in capsys.readouterr().out
    assert_converted(tmp_path, original)
    assert len(list(folder.glob("page_*.pkl"))) > 1  # several pages of the new format
    assert sorted(os.listdir(f"{folder}.pylon")) == ["page_0.pkl", "page_10.pkl", "page_2.pkl"]
    assert convert_main([str(folder), "--trust-pickles"]) == 0  # done already: says so, changes nothing
    assert "current page format already" in capsys.readouterr().out
    assert_converted(tmp_path, original)


def test_the_command_s_first_name_still_converts(tmp_path):
    """``python -m debuggers.convert_pages``, which run notes and earlier messages cite, runs the same command."""
    folder = tmp_path / "debugger"
    original = write_pylon_folder(folder)
    result = subprocess.run([sys.executable, "-m", "debuggers.convert_pages", str(folder), "--trust-pickles"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert_converted(tmp_path, original)


def test_an_output_a_page_cannot_hold_becomes_a_note_and_the_rest_converts(tmp_path):
    folder = tmp_path / "debugger"
    os.makedirs(folder)
    joblib.dump({0: {"tags": {"a", "b"}, "ok": np.arange(3)}}, folder / "page_0.pkl")
    assert convert_main([str(folder), "--trust-pickles"]) == 0
    outputs = load_debug_outputs(str(tmp_path))[0]
    assert outputs["tags"].startswith("<not converted from page_0.pkl (datapoint 0): debug output at 'tags' is a ")
    np.testing.assert_array_equal(outputs["ok"], np.arange(3))


@pytest.mark.parametrize("page", [["not", "pairs"], {"idx": {"x": 1}}, {0: [1, 2]}], ids=["list", "key", "outputs"])
def test_a_pickle_that_is_not_a_pylon_page_is_not_converted(tmp_path, page, capsys):
    folder = tmp_path / "debugger"
    write_pylon_folder(folder)
    joblib.dump(page, folder / "page_11.pkl")
    assert convert_main([str(folder), "--trust-pickles"]) == 2
    assert "page_11.pkl" in capsys.readouterr().err
    assert not (tmp_path / "debugger.converting").exists() and not (tmp_path / "debugger.pylon").exists()
    with pytest.raises(PicklePagesError):
        load_debug_outputs(str(tmp_path))


def test_a_datapoint_in_two_pages_is_not_converted(tmp_path, capsys):
    folder = tmp_path / "debugger"
    write_pylon_folder(folder)
    joblib.dump({4: pylon_outputs(4)}, folder / "page_11.pkl")
    assert convert_main([str(folder), "--trust-pickles"]) == 2
    assert "datapoint 4 is in both" in capsys.readouterr().err


@pytest.mark.parametrize("compress", [0, 3, "gzip", "bz2", "xz", "lzma"])
def test_every_joblib_page_is_told_from_a_lantern_page_by_its_first_bytes(tmp_path, compress):
    path = str(tmp_path / "page_0.pkl")
    joblib.dump({0: {"x": np.arange(3)}}, path, compress=compress)
    assert page_kind(path) == "pickle"


def test_a_folder_without_index_or_pickles_says_what_it_holds(tmp_path):
    folder = tmp_path / "debugger"
    folder.mkdir()
    with pytest.raises(CorruptPageError, match="holds no page and no index.json: the run stopped before"):
        load_debug_outputs(str(tmp_path))
    (folder / "page_0.pkl").write_bytes(b"not a page")
    with pytest.raises(CorruptPageError, match="holds no page and no index.json"):
        load_debug_outputs(str(tmp_path))
    write_page(str(folder / "page_0.pkl"), {0: {"x": np.arange(3)}})
    with pytest.raises(CorruptPageError, match="holds Lantern pages but no index.json.*rerun the epoch"):
        load_debug_outputs(str(tmp_path))


# ------------------------------------------------------------------ killed while converting
KILL = "os.kill(os.getpid(), signal.SIGKILL)"
KILL_POINTS = {
    # while the pages are written into debugger.converting (some pages sealed already)
    "writing": f"""
        from debuggers.pages.writer import PageWriter
        add, added = PageWriter.add, []
        def add_then_die(self, idx, outputs):
            added.append(idx)
            if len(added) == 5:
                {KILL}
            return add(self, idx, outputs)
        PageWriter.add = add_then_die
        """,
    "before_the_exchange": f"""
        convert._exchange = lambda first, second: {KILL}
        """,
    "after_the_exchange": f"""
        exchange = convert._exchange
        def exchange_then_die(first, second):
            exchange(first, second)
            {KILL}
        convert._exchange = exchange_then_die
        """,
}
SCRIPT = """
import os, signal, sys
from debuggers.pages import convert
{patch}
sys.exit(convert.main(sys.argv[1:]))
"""


def killed_conversion(folder, patch: str) -> None:
    script = SCRIPT.format(patch=textwrap.dedent(patch))
    result = subprocess.run([sys.executable, "-c", script, str(folder), "--trust-pickles", "--page-size-mb", "0.001"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == -signal.SIGKILL, result.stderr


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_conversion_killed_at_any_point_leaves_the_old_or_the_new_folder_and_the_same_command_finishes(
        tmp_path, point):
    folder = tmp_path / "debugger"
    original = write_pylon_folder(folder)
    pylon_bytes = files_of(folder)
    killed_conversion(folder, KILL_POINTS[point])
    if point == "after_the_exchange":
        assert_converted(tmp_path, original)  # the new folder, complete
    else:
        with pytest.raises(PicklePagesError):  # the old folder, intact
            load_debug_outputs(str(tmp_path))
        assert files_of(folder) == pylon_bytes
    assert convert_main([str(folder), "--trust-pickles"]) == 0
    assert_converted(tmp_path, original)
    assert not (tmp_path / "debugger.converting").exists()
    assert files_of(f"{folder}.pylon") == pylon_bytes


def files_of(folder) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in pathlib.Path(folder).iterdir()}


def test_without_an_atomic_exchange_a_kill_between_the_renames_is_finished_by_the_same_command(tmp_path, caplog):
    """Where the file system cannot exchange two folders, the old one is renamed away before the new one takes
    its place: killed in between, the reader says how to finish, and the same command does."""
    folder = tmp_path / "debugger"
    original = write_pylon_folder(folder)
    killed_conversion(folder, f"""
        convert._exchange = lambda first, second: False
        rename = os.rename
        def rename_then_die(source, target):
            rename(source, target)
            {KILL}
        os.rename = rename_then_die
        """)
    assert not folder.exists() and (tmp_path / "debugger.pylon").is_dir()
    with caplog.at_level(logging.WARNING, logger="lantern.debugger"):
        assert load_debug_outputs(str(tmp_path)) is None
    assert f"cut short; finish it with: python -m debuggers.pages.convert {folder}" in caplog.text
    assert convert_main([str(folder), "--trust-pickles"]) == 0
    assert_converted(tmp_path, original)
