"""Every kind of page Lantern writes loads with ``joblib.load`` and ``pickle.load``, as Pylon's pages do, to
exactly what Lantern's own reader (which never unpickles) reads from it."""

from __future__ import annotations

import pickle

import joblib
import numpy as np
import pytest
import torch

from debuggers.batch_split import split_batch_value
from debuggers.pages import file_format as page_format
from debuggers.pages.buffer_pool import BufferPool
from debuggers.pages.file_format import PAGE_GLOB, PageFile, load_page
from tests.debuggers.library import run_epoch
from tests.debuggers.test_library_debuggers import build

pytestmark = pytest.mark.timeout(120)


def assert_identical(unpickled, read, path="") -> None:
    """The same values of the same types; arrays of the same dtype and shape (NaN equal to NaN)."""
    assert type(unpickled) is type(read), (path, type(unpickled), type(read))
    if isinstance(read, np.ndarray):
        assert (unpickled.dtype, unpickled.shape) == (read.dtype, read.shape), path
        np.testing.assert_array_equal(unpickled, read, err_msg=path)
    elif isinstance(read, dict):
        assert list(unpickled) == list(read), path
        for key in read:
            assert_identical(unpickled[key], read[key], f"{path}[{key!r}]")
    elif isinstance(read, (list, tuple)):
        assert len(unpickled) == len(read), path
        for i, (a, b) in enumerate(zip(unpickled, read)):
            assert_identical(a, b, f"{path}[{i}]")
    elif isinstance(read, float) and read != read:
        assert unpickled != unpickled, path
    else:
        assert unpickled == read, path


def assert_loads_alike(path: str, expected_indices) -> None:
    """``pickle.load`` and ``joblib.load`` of the page give what Lantern's reader reads, record by record."""
    read = load_page(path)
    assert sorted(read) == sorted(expected_indices)
    with open(path, "rb") as file:
        unpickled = pickle.load(file)
    for loaded in (unpickled, joblib.load(path)):
        assert sorted(loaded) == sorted(read)
        for idx in read:
            assert_identical(loaded[idx], read[idx], f"idx {idx}")


def every_kind_of_value(i: int) -> dict:
    rng = np.random.default_rng(i)
    return {
        "c": rng.standard_normal((3, 4, 5)).astype(np.float32), "f": np.asfortranarray(rng.standard_normal((7, 3))),
        "strided": rng.standard_normal((6, 6))[:, ::2], "empty": np.zeros((0, 3)), "scalar": np.array(2.5 + i),
        "bool": np.array([True, False]), "dates": np.array(["2024-01-02", "NaT"], dtype="datetime64[D]"),
        "big_endian": np.arange(5, dtype=">i4"), "text": np.array(["ab", "c\u00e9\U0001f600"]),
        "half": np.ones(3, np.float16), "nan": float("nan"), "int": 2**40 + i, "small": -i, "none": None,
        "flag": i % 2 == 0, "z": complex(1, i), "raw": b"\x00\xff", "name": "layer\u00e9",
        "nested": {"list": [1, "x", (2.5, None)], 3: {"deep": [()]}},
    }


def test_records_alone(tmp_path):
    path = str(tmp_path / "page_0.pkl")
    page = PageFile(path, 0)
    for i in range(5):
        page.append(i * 7, every_kind_of_value(i))
    page.seal()
    assert_loads_alike(path, [0, 7, 14, 21, 28])


def test_batched_records_of_one_structure_and_of_several(tmp_path):
    path = str(tmp_path / "page_0.pkl")
    page = PageFile(path, 0)
    rows, batch_value = split_batch_value({"features": torch.randn(16, 4, 3, 3), "score": torch.rand(16),
                                           "kind": "feature_map"}, 16)
    page.append_batch(list(range(16)), rows, None, batch_value)  # one structure: stretches and patched records
    mixed = [{"x": np.full(4, i, np.float32), **({"extra": [i, float(i)]} if i % 2 else {})} for i in range(16)]
    page.append_batch(list(range(100, 116)), mixed)  # two structures, each a batch of its own
    page.seal()
    assert_loads_alike(path, [*range(16), *range(100, 116)])


def test_stretches_written_with_o_direct(direct_folder):
    """A big capture in buffers of their own (``AttentionDebugger``'s) goes to disk with O_DIRECT."""
    path = str(direct_folder / "page_0.pkl")
    page = PageFile(path, 0)
    pool = BufferPool()
    for number in range(2):
        rows, batch_value = split_batch_value({"attention": pool.copy_of(torch.rand(32, 4, 64, 64))}, 32)
        page.append_batch(list(range(32 * number, 32 * (number + 1))), rows, None, batch_value)
        page.write_pending()
    assert page._file.direct is not None  # the file system took O_DIRECT
    page.seal()
    assert page_format.DIRECT_MIN_BYTES <= 32 * 4 * 64 * 64 * 4
    assert_loads_alike(path, range(64))


@pytest.mark.parametrize("model_name", ["cnn", "attention"])
def test_every_ready_debugger_s_pages(tmp_path, model_name):
    """An epoch of every ready-made debugger, written by ``SequentialDebugger`` in pages of 64 KiB."""
    model, debuggers = build(model_name)
    _, outputs = run_epoch(model, torch.randn(12, 3, 16, 16), tmp_path, 4, debuggers, page_size_mb=1 / 16)
    pages = sorted((tmp_path / "debugger").glob(PAGE_GLOB))
    assert len(pages) > 1
    indices = []
    for path in pages:
        indices += list(load_page(str(path)))
        assert_loads_alike(str(path), load_page(str(path)))
    assert sorted(indices) == sorted(outputs) == list(range(12))
    assert set(outputs[0]) == {debugger["name"] for debugger in debuggers}
