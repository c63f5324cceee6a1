"""The page format: conversion of debugger outputs, atomic writes, and the safe loader."""

from __future__ import annotations

import collections
import enum
import errno
import fcntl
import filecmp
import fnmatch
import json
import math
import mmap
import os
import pickle
import sys
import threading

import joblib
import numpy as np
import pytest
import torch
from numpy._core.multiarray import _reconstruct
from numpy._core.numeric import _frombuffer

from debuggers.batch_split import split_batch_value
from debuggers.pages import encoding as page_encoding
from debuggers.pages import file_format as page_format
from debuggers.pages import legacy as legacy_pages
from debuggers.pages.buffer_pool import BufferPool
from debuggers.pages.encoding import RecordEncoder
from debuggers.pages.file_format import (
    PAGE_GLOB,
    CorruptPageError,
    PageFile,
    PageWriteError,
    UnsafePageError,
    index_file_name,
    is_own_file,
    load_page,
    page_file_name,
    write_page,
)
from debuggers.pages.index import read_index, write_index
from debuggers.pages.values import UnsupportedOutputError, held_storage, to_page_value
from tests.debuggers.library import page_table, resident_blocks
from tests.reliability.crafted_index import TouchMarker
from utils.atomic_files import temporary_path

pytestmark = pytest.mark.timeout(30)


class Crafted:
    """Pickles as ``fn(*args)`` followed by BUILD(``state``): what a hand-made page could contain."""

    def __init__(self, fn, args, state=None) -> None:
        self.fn, self.args, self.state = fn, args, state

    def __reduce__(self):
        return (self.fn, self.args) if self.state is None else (self.fn, self.args, self.state)


def crafted_page(tmp_path, value) -> str:
    path = tmp_path / "page_0.pkl"
    path.write_bytes(pickle.dumps({0: {"x": value}}, protocol=5))
    return str(path)


def temp_files(folder) -> list[str]:
    return [name for name in os.listdir(folder) if ".tmp-" in name]


# ------------------------------------------------------------------ names
def test_file_names_per_rank():
    assert page_file_name(0, 1, 3) == "page_3.pkl"
    assert page_file_name(2, 4, 3) == "page_rank2_3.pkl"
    assert index_file_name(0, 1) == "index.json"
    assert index_file_name(2, 4) == "index_rank2.json"


def test_page_glob_never_matches_temporary_files(tmp_path):
    temp = os.path.basename(temporary_path(str(tmp_path / "page_0.pkl")))
    other_thread: list[str] = []
    thread = threading.Thread(target=lambda: other_thread.append(temporary_path(str(tmp_path / "page_0.pkl"))))
    thread.start()
    thread.join()
    assert os.path.basename(other_thread[0]) != temp  # two threads writing one page never share a temp file
    assert fnmatch.fnmatch("page_0.pkl", PAGE_GLOB) and fnmatch.fnmatch("page_rank1_0.pkl", PAGE_GLOB)
    assert not fnmatch.fnmatch(temp, PAGE_GLOB)
    assert is_own_file(temp, 0, 1) and is_own_file("page_12.pkl", 0, 1) and is_own_file("index.json", 0, 1)
    assert not is_own_file("page_rank1_0.pkl", 0, 1) and not is_own_file("notes.txt", 0, 1)
    assert is_own_file("page_rank1_0.pkl", 1, 2) and not is_own_file("page_rank0_0.pkl", 1, 2)


# ------------------------------------------------------------- conversion
def test_bfloat16_tensor_becomes_float32_array():
    tensor = torch.randn(4, 5).to(torch.bfloat16)
    value = to_page_value(tensor)
    assert isinstance(value, np.ndarray) and value.dtype == np.float32
    np.testing.assert_array_equal(value, tensor.float().numpy())


def test_view_of_large_tensor_becomes_its_own_small_array():
    base = torch.randn(1000, 1000)
    rows, columns = base[3:5], base[:, 7]
    rows_value, columns_value = to_page_value((rows, columns))
    assert rows_value.nbytes == 2 * 1000 * 4 and columns_value.nbytes == 1000 * 4
    assert rows_value.flags.owndata and columns_value.flags.owndata
    expected = base[3:5].clone()
    base.fill_(0)  # the page keeps the values at capture time, not a window into the model's buffer
    np.testing.assert_array_equal(rows_value, expected.numpy())


def test_grad_tensors_numbers_and_containers_convert():
    weights = torch.ones(3, requires_grad=True)
    output = {
        "w": weights * 2, "shape": torch.Size([2, 3]), "pair": (1, "a"), "loss": torch.tensor(0.25),
        "count": np.int64(7), "flag": np.bool_(True), 3: None, "z": 1 + 2j, "raw": b"\x00\x01",
        "hist": [np.float32(0.5), torch.tensor([1, 2])],
    }
    value = to_page_value(output)
    np.testing.assert_array_equal(value["w"], [2.0, 2.0, 2.0])
    assert value["shape"] == [2, 3] and type(value["shape"]) is list
    assert value["pair"] == (1, "a") and type(value["pair"]) is tuple
    assert value["loss"] == 0.25 and type(value["loss"]) is float
    assert value["count"] == 7 and type(value["count"]) is int and value["flag"] is True
    assert value[3] is None and value["z"] == 1 + 2j and value["raw"] == b"\x00\x01"
    assert value["hist"][0] == 0.5 and type(value["hist"][0]) is float
    np.testing.assert_array_equal(value["hist"][1], [1, 2])


class Color(enum.IntEnum):
    RED = 1


class Layer(str, enum.Enum):
    CONV = "conv"


def test_builtin_subclasses_are_stored_as_plain_values(tmp_path):
    point = collections.namedtuple("point", "x y")
    value = to_page_value({Layer.CONV: Color.RED, "p": point(1, 2), "d": collections.OrderedDict(a=1)})
    assert type(value["p"]) is tuple and type(value["d"]) is dict
    assert type(value[Layer.CONV]) is int and all(type(k) is str for k in value)
    path = str(tmp_path / "page_0.pkl")
    write_page(path, {0: value})
    assert load_page(path) == {0: {"conv": 1, "p": (1, 2), "d": {"a": 1}}}


def held_bytes(value) -> int:
    return sum(dict((id(owner), nbytes) for owner, nbytes in held_storage(value)).values())


def test_held_storage_counts_the_memory_really_kept_alive():
    assert held_bytes(to_page_value({"features": torch.zeros(256, 1024)})) == 1 << 20  # real bytes, not getsizeof
    batch = to_page_value(torch.zeros(64, 1024))
    assert held_bytes([batch[3], batch[4]]) == 64 * 1024 * 4  # two rows keep the whole batch array alive, once
    big = np.zeros((1000, 1000))
    assert held_bytes({"view": big[:2]}) == big.nbytes  # a NumPy view keeps its base alive: counted as such
    assert held_bytes({"view": to_page_value(torch.zeros(1000, 1000)[:2])}) == 2 * 1000 * 4  # tensor views copied


@pytest.mark.parametrize("bad, path, type_name", [
    ({"stats": {"hist": [1, 2, object()]}}, "stats.hist[2]", "builtins.object"),
    ({"fn": lambda x: x}, "fn", "function"),
    ({"ids": {1, 2}}, "ids", "builtins.set"),
    ({"arr": np.array([1, "a"], dtype=object)}, "arr", "Python objects"),
    ({"rec": np.zeros(2, dtype=[("a", "f4")])}, "rec", "structured"),
])
def test_unsupported_output_names_path_type_and_fix(bad, path, type_name):
    with pytest.raises(UnsupportedOutputError) as info:
        to_page_value(bad)
    message = str(info.value)
    assert f"'{path}'" in message and type_name in message and "return" in message


def test_bad_dict_key_and_cycles_are_refused():
    with pytest.raises(UnsupportedOutputError, match=r"'a'.*dict keys must be str or int"):
        to_page_value({"a": {(1, 2): 3}})
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(UnsupportedOutputError, match="nested more than"):
        to_page_value({"loop": cycle})


# ------------------------------------------------------- writing, loading
def test_page_round_trips_exactly(tmp_path):
    original = {
        0: {"fm": torch.randn(8, 16, 16), "half": torch.randn(5).half(), "ints": torch.arange(6).reshape(2, 3)},
        7: {"fm": torch.randn(16, 8).t(), "meta": {"name": "x", "k": 3}},
    }
    page = {idx: to_page_value(outputs) for idx, outputs in original.items()}
    path = str(tmp_path / "page_0.pkl")
    write_page(path, page)
    loaded = load_page(path)
    assert sorted(loaded) == [0, 7] and temp_files(tmp_path) == []
    for idx, outputs in original.items():
        for name, tensor in outputs.items():
            if isinstance(tensor, torch.Tensor):
                assert loaded[idx][name].dtype == tensor.numpy().dtype
                np.testing.assert_array_equal(loaded[idx][name], tensor.numpy())
    assert loaded[7]["meta"] == {"name": "x", "k": 3}


def test_write_into_missing_folder_raises_clear_error(tmp_path):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a regular file")
    path = str(blocker / "page_0.pkl")
    with pytest.raises(PageWriteError) as info:
        write_page(path, {0: {"x": 1}})
    assert path in str(info.value) and "Free disk space" in str(info.value)
    assert info.value.path == path and info.value.errno == errno.ENOTDIR
    assert temp_files(tmp_path) == []


def test_full_disk_mid_write_leaves_no_page_and_no_temp_file(tmp_path, monkeypatch):
    real_append = page_format._append

    def append_then_fail(file, buffers):
        real_append(file, buffers)
        if os.path.getsize(file.name) > 100:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(page_format, "_append", append_then_fail)
    with pytest.raises(PageWriteError, match="No space left on device.*lower page_size_mb"):
        write_page(str(tmp_path / "page_0.pkl"), {0: {"x": np.zeros(10)}})
    assert os.listdir(tmp_path) == []


def test_a_page_reserves_its_blocks_ahead_and_gives_back_the_rest_when_sealed(tmp_path):
    path = str(tmp_path / "page_0.pkl")
    page = page_format.PageFile(path, 0, expected_bytes=8 * 2**20)
    arrays = [np.full(4096, i, np.float32) for i in range(16)]  # 256 KiB: a thirtieth of the page expected
    page.append_batch(list(range(16)), [{"x": array} for array in arrays])
    page.write_pending()
    reserved = os.stat(temporary_path(path)).st_blocks * 512
    if reserved < page.size + 4096:
        pytest.skip("this file system reserves no blocks ahead (no fallocate)")
    assert reserved >= 8 * 2**20  # one reservation for the page expected, not one per write
    page.seal()
    size = os.path.getsize(path)
    assert os.stat(path).st_blocks * 512 <= -(-size // 4096) * 4096  # the blocks past the end are given back
    assert [load_page(path)[i]["x"][0] for i in range(16)] == list(range(16))


def test_malicious_pickle_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "pwned"
    path = str(tmp_path / "page_0.pkl")
    with open(path, "wb") as f:
        pickle.dump({0: {"x": TouchMarker(str(marker))}}, f)
    with pytest.raises(UnsafePageError) as info:
        load_page(path)
    message = str(info.value)
    assert path in message and "system" in message and "nothing from it was executed" in message
    assert not marker.exists()
    with open(path, "rb") as f:  # proof that the file is really malicious
        pickle.load(f)
    assert marker.exists()


def test_old_joblib_format_pages_are_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = str(tmp_path / "page_0.pkl")
    joblib.dump({0: {"ok": np.zeros(3), "x": TouchMarker(str(marker))}}, path)
    with pytest.raises(UnsafePageError, match="NumpyArrayWrapper"):
        load_page(path)
    assert not marker.exists()


@pytest.mark.parametrize("payload", ["plain objects", "code"])
def test_object_dtype_array_page_is_refused(tmp_path, payload):
    marker = tmp_path / "pwned"
    items = [1, "a"] if payload == "plain objects" else [TouchMarker(str(marker))]
    path = crafted_page(tmp_path, np.array(items, dtype=object))  # NumPy pickles it as _reconstruct + BUILD
    with pytest.raises(UnsafePageError, match="Python objects"):
        load_page(path)
    assert not marker.exists()


@pytest.mark.parametrize("dtype", [
    Crafted(np.dtype, ("O8", False, True)),
    Crafted(np.dtype, ("i8", False, True), (3, "<", None, None, None, -1, -1, 63)),  # BUILD sets object flags
])
def test_crafted_object_dtype_frombuffer_is_refused(tmp_path, dtype):
    path = crafted_page(tmp_path, Crafted(_frombuffer, (b"\x00" * 16, dtype, (2,), "C")))
    with pytest.raises(UnsafePageError, match="Python objects"):
        load_page(path)


# A dtype whose field lies far outside its 4-byte item, flagged for list pickling: NumPy's own
# __setstate__ would write 1.0 out of bounds. The BUILD must never reach NumPy.
OUT_OF_BOUNDS = Crafted(np.dtype, ("V4", False, True),
                        (3, "|", None, ("a",), {"a": (np.dtype("f8"), 100_000)}, 4, 1, 2))


@pytest.mark.parametrize("array", [
    Crafted(_reconstruct, (np.ndarray, (0,), b"b"), (1, (1,), OUT_OF_BOUNDS, False, [(1.0,)])),
    Crafted(_frombuffer, (b"\x00" * 8, np.dtype("f8"), (1,), "C"), (1, (1,), OUT_OF_BOUNDS, False, [(1.0,)])),
])
def test_build_of_an_array_with_a_crafted_dtype_is_refused(tmp_path, array):
    with pytest.raises(CorruptPageError, match="raw bytes"):
        load_page(crafted_page(tmp_path, array))


def test_structured_dtype_and_ndarray_subclass_are_refused(tmp_path):
    state = (1, (1,), OUT_OF_BOUNDS, False, b"\x00" * 4)
    with pytest.raises(UnsafePageError, match="structured dtype"):
        load_page(crafted_page(tmp_path, Crafted(_reconstruct, (np.ndarray, (0,), b"b"), state)))
    with pytest.raises(UnsafePageError, match="ndarray subclass"):
        load_page(crafted_page(tmp_path, Crafted(_reconstruct, (np.dtype, (0,), b"b"))))
    with pytest.raises(UnsafePageError, match="MaskedArray|_mareconstruct"):
        load_page(crafted_page(tmp_path, np.ma.masked_array([1.0, 2.0], mask=[0, 1])))


@pytest.mark.parametrize("state, error", [
    (b"N}\x8c\x03_fncbuiltins\ncomplex\ns\x86", UnsafePageError),  # slot state: setattr(guard, "_fn", complex)
    (b"}\x8c\x03_fncbuiltins\ncomplex\ns", CorruptPageError),  # dict state: the guard has no __dict__
])
def test_build_on_an_allowed_global_cannot_rewire_it(tmp_path, state, error):
    guard = legacy_pages._ALLOWED_GLOBALS[("numpy", "dtype")]
    function = guard._fn
    path = tmp_path / "page_0.pkl"
    path.write_bytes(b"\x80\x04cnumpy\ndtype\n" + state + b"b.")  # BUILD(numpy.dtype, state)
    with pytest.raises(error, match="BUILD|__dict__"):
        load_page(str(path))
    assert guard._fn is function
    path.write_bytes(pickle.dumps({0: {"x": np.arange(3)}}, protocol=5))  # a format-1 page still loads
    np.testing.assert_array_equal(load_page(str(path))[0]["x"], np.arange(3))


@pytest.mark.parametrize("array", [
    Crafted(_frombuffer, (b"\x00" * 12, np.dtype("f8"), (2,), "C")),
    Crafted(_frombuffer, (b"\x00" * 16, np.dtype("f8"), (2, -1), "C")),
    Crafted(_frombuffer, (b"\x00" * 16, np.dtype("f8"), (2,), "K")),
    Crafted(_reconstruct, (np.ndarray, (0,), b"b"), (1, (3,), np.dtype("f8"), False, b"\x00" * 16)),
])
def test_shape_that_does_not_match_the_data_is_corrupt(tmp_path, array):
    with pytest.raises(CorruptPageError):
        load_page(crafted_page(tmp_path, array))


def test_truncated_and_garbage_pages_are_corrupt(tmp_path):
    path = tmp_path / "page_0.pkl"
    write_page(str(path), {0: {"fm": np.arange(100_000, dtype=np.float32)}})
    data = path.read_bytes()
    for broken in (data[: len(data) // 2], data[:40], b"", os.urandom(2000)):
        path.write_bytes(broken)
        with pytest.raises(CorruptPageError, match="page_0.pkl"):
            load_page(str(path))


def test_pickle_that_is_not_a_page_is_corrupt(tmp_path):
    path = str(tmp_path / "page_0.pkl")
    joblib.dump([1, 2, 3], path)
    with pytest.raises(CorruptPageError, match="not a Lantern page"):
        load_page(path)


def round_trip_page() -> dict:
    rng = np.random.default_rng(0)
    arrays = {
        "c": rng.standard_normal((3, 4, 5)).astype(np.float32), "f": np.asfortranarray(rng.standard_normal((7, 3))),
        "permuted": np.array(rng.standard_normal((2, 3, 4)).transpose(1, 0, 2), copy=True),
        "strided": rng.standard_normal((6, 6))[:, ::2], "empty": np.zeros((0, 3)), "scalar": np.array(2.5),
        "bool": np.array([True, False]), "dates": np.array(["2024-01-02", "NaT"], dtype="datetime64[D]"),
        "deltas": np.array([5, -1], dtype="timedelta64[ms]"), "big_endian": np.arange(5, dtype=">i4"),
        "text": np.array(["ab", "c\u00e9\U0001f600"]), "raw_text": np.array([b"ab", b"c"]),
        "half": np.ones(3, np.float16),
    }
    return {0: {**arrays, "meta": [1, "x", (2.5, None)], "z": 1j, "raw": b"\x00\xff", 3: {"nested": {"deep": [()]}}},
            1: {"c": arrays["c"] + 1}}


def assert_same_page(loaded: dict, page: dict) -> None:
    assert sorted(loaded) == sorted(page)
    for idx, outputs in page.items():
        assert sorted(loaded[idx], key=str) == sorted(outputs, key=str)
        for name, value in outputs.items():
            if isinstance(value, np.ndarray):
                assert type(loaded[idx][name]) is np.ndarray and loaded[idx][name].dtype == value.dtype
                assert loaded[idx][name].shape == value.shape
                np.testing.assert_array_equal(loaded[idx][name], value)
            else:
                assert loaded[idx][name] == value and type(loaded[idx][name]) is type(value)


def test_every_kind_of_array_and_value_round_trips(tmp_path):
    page = round_trip_page()
    path = str(tmp_path / "page_0.pkl")
    write_page(path, page)
    assert_same_page(load_page(path), page)


def test_pages_are_plain_pickles_that_joblib_loads(tmp_path):
    page = round_trip_page()
    path = str(tmp_path / "page_0.pkl")
    write_page(path, page)
    assert_same_page(joblib.load(path), page)


def encoded_bytes(encoder: RecordEncoder) -> bytes:
    return b"".join(memoryview(buffer).tobytes() for buffer in encoder.take())


def test_records_encoded_from_a_shared_plan_equal_the_full_walk(tmp_path):
    """Records of one structure are encoded from a cached plan: same bytes and locations as walking each."""
    rng = np.random.default_rng(1)
    records = [(idx, {"fm": rng.standard_normal((2, 3)).astype(np.float32), "score": float(score), "%s key": "x%d",
                      1: {"flag": np.array(idx % 2 == 0), "n": None}, 2: [idx, (0.5, np.arange(idx % 3))]})
               for idx, score in [(0, 0.25), (300, float("nan")), (-7, float("inf")), (2**40, -0.0), (5, 1e-300)]]
    records += [(8, {1: 1}), (9, {1: True}), (10, {True: 1}), (11, {1: 1})]  # equal but not the same type
    planned, walked = RecordEncoder(17), RecordEncoder(17)
    for idx, value in records:
        start = walked.position
        walked.int(idx)
        assert planned.record(idx, value) == (start, *walked.header(walked.value(value)))
    assert encoded_bytes(planned) == encoded_bytes(walked)
    path = str(tmp_path / "page_0.pkl")
    write_page(path, dict(records))
    for loaded in (load_page(path), joblib.load(path)):
        assert sorted(loaded) == sorted(idx for idx, _ in records)
        assert [(type(key), type(value)) for idx in (8, 9, 10, 11) for key, value in loaded[idx].items()] \
            == [(int, int), (int, bool), (bool, int), (int, int)]
        for idx, value in records[:5]:
            np.testing.assert_array_equal(loaded[idx]["fm"], value["fm"])
            assert loaded[idx][1]["flag"].shape == () and loaded[idx][1]["flag"] == (idx % 2 == 0)
            assert loaded[idx][2][1][1].shape == (idx % 3,)
            assert str(loaded[idx]["score"]) == str(value["score"]) and loaded[idx]["%s key"] == "x%d"


def test_records_differing_only_in_numbers_and_array_bytes_share_one_plan():
    page_encoding._PLANS.clear()
    encoder = RecordEncoder(0)
    for idx in range(300):  # ints of 1, 4 and 8 opcode bytes, floats, arrays
        encoder.record(idx, {"count": idx * 2**25, "score": idx / 7, "fm": np.full(3, idx, np.float32),
                             "layer": "layer4"})
    assert len(page_encoding._PLANS) == 1
    encoder.record(300, {"count": 1, "score": 0.5, "fm": np.zeros(3, np.float32), "layer": "layer3"})
    assert len(page_encoding._PLANS) == 2  # a different string is a different structure


def test_index_round_trips_and_corrupt_index_is_reported(tmp_path):
    path = str(tmp_path / "index.json")
    index = {"version": 2, "rank": 0, "world_size": 1, "complete": True, "pages": 1, "datapoints": 3,
             "sorted": True}
    write_index(path, index)
    assert read_index(path) == index and temp_files(tmp_path) == []
    (tmp_path / "index.json").write_text('{"version": 1, "pages": [')
    with pytest.raises(CorruptPageError, match="index.json"):
        read_index(path)
    write_index(path, {"version": 99})
    with pytest.raises(CorruptPageError, match="version"):
        read_index(path)


# ------------------------------------------------------- batches of records
def batch_values(count: int) -> list[dict]:
    """Records of one structure: arrays of many dtypes (0-d, big-endian, bool, float16, empty), numbers of
    every JSON spelling, strings, None, bools, nested lists and tuples, int keys."""
    rng = np.random.default_rng(2)
    specials = [float("nan"), float("inf"), -float("inf"), -0.0, 5e-324, -2.2250738585072014e-308, 1e300]
    return [{"d": {"kind": "feature_map", "fm": rng.standard_normal((3, 4)).astype(np.float32),
                   "scalar": np.array(i, ">i4"), "mask": rng.standard_normal(5) > 0, "half": np.full(2, i, np.float16),
                   "empty": np.zeros((0, 2)), "score": specials[i % len(specials)] if i % 3 else i / 7,
                   "count": (-1) ** i * i * 2**25, "nothing": None, "flag": True, "shape": [3, 4],
                   7: (0.5, [i, "x"]), "%s key": "x%d"}}
            for i in range(count)]


def assert_same_value(loaded, expected) -> None:
    """Equal, with the same types, dict keys in the same order, arrays of the same dtype and shape."""
    assert type(loaded) is type(expected)
    if type(expected) is np.ndarray:
        assert (loaded.dtype, loaded.shape) == (expected.dtype, expected.shape)
        np.testing.assert_array_equal(loaded, expected)
    elif type(expected) is dict:
        assert [(type(key), key) for key in loaded] == [(type(key), key) for key in expected]
        for key, value in expected.items():
            assert_same_value(loaded[key], value)
    elif type(expected) in (list, tuple):
        assert len(loaded) == len(expected)
        for item, value in zip(loaded, expected):
            assert_same_value(item, value)
    elif type(expected) is float:
        assert str(loaded) == str(expected)  # nan, -0.0
    else:
        assert loaded == expected


def assert_page_holds(path: str, indices: list[int], values: list, in_order: bool = True) -> None:
    """``write_page`` of these datapoints, read back by Lantern's reader and by ``pickle.load``; the records in
    the datapoints' order unless ``in_order`` is False (a batch of several structures: one after the other)."""
    table = write_page(path, dict(zip(indices, values)))
    order = (lambda idx: idx) if in_order else sorted
    assert order(table["idx"].tolist()) == order(indices)
    with open(path, "rb") as file:
        unpickled = pickle.load(file)
    for loaded in (load_page(path), unpickled):
        assert order(list(loaded)) == order(indices)
        for idx, value in zip(indices, values):
            assert_same_value(loaded[idx], value)


def one_by_one_page(path: str, indices: list[int], values: list) -> None:
    """A page of the same datapoints, each record encoded on its own (arrays inline)."""
    page = page_format.PageFile(path, 0)
    for idx, value in zip(indices, values):
        page.append(idx, value)
    page.seal()


def test_a_batch_encoded_at_once_reads_back_as_its_records_encoded_one_by_one(tmp_path):
    indices, values = [3 * i - 40 for i in range(40)], batch_values(40)
    assert_page_holds(str(tmp_path / "page_0.pkl"), indices, values)
    one_by_one_page(str(tmp_path / "page_1.pkl"), indices, values)
    for reader in (load_page, joblib.load):
        batched, single = reader(str(tmp_path / "page_0.pkl")), reader(str(tmp_path / "page_1.pkl"))
        assert list(batched) == list(single) == indices
        for idx in indices:
            assert_same_value(batched[idx], single[idx])


def test_a_batch_writes_each_array_slot_as_one_aligned_stretch(tmp_path):
    """The records hold no array bytes: each slot's arrays lie one after the other before them, the stretch
    starting at a file offset aligned (modulo 64) as the first array is in memory."""
    batch = np.random.default_rng(3).standard_normal((20, 4, 5)).astype(np.float32)[:, :, 1:]  # 64 B rows
    rows = [np.ascontiguousarray(row) for row in batch]
    means = np.arange(20, dtype=np.int16)
    values = [{"fm": row, "mean": means[i:i + 1], "layer": "conv1"} for i, row in enumerate(rows)]
    path = str(tmp_path / "page_0.pkl")
    table = write_page(path, dict(zip(range(20), values)))
    assert len(set(table["start"].tolist())) == 1 and len(set(table["header_length"].tolist())) == 1
    with open(path, "rb") as file:
        data = file.read()
    headers = [json.loads(data[int(row["header"]):int(row["header"] + row["header_length"])]) for row in table]
    fm_stretch, fm_row, _, _ = headers[0]["d"][0][1]["r"]
    mean_stretch, _, _, _ = headers[0]["d"][1][1]["r"]
    assert fm_stretch % 64 == rows[0].__array_interface__["data"][0] % 64 and fm_row == 0
    assert [header["d"][0][1]["r"][:2] for header in headers] == [[fm_stretch, i] for i in range(20)]
    assert data[fm_stretch:fm_stretch + 20 * 64] == b"".join(row.tobytes() for row in rows)
    assert data[mean_stretch:mean_stretch + 40] == means.tobytes()
    assert all(int(row["start"]) < fm_stretch < mean_stretch < int(row["header"]) for row in table)
    assert_page_holds(str(tmp_path / "page_1.pkl"), list(range(20)), values)


def test_headers_have_one_length_per_structure_and_stay_plain_json(tmp_path):
    """Numbers in headers are padded with spaces (JSON allows them), so records of one plan have one length."""
    path = str(tmp_path / "page_0.pkl")
    table = write_page(path, dict(enumerate(batch_values(20))))
    assert len(set(table["header_length"].tolist())) == 1
    assert len(set(np.diff(table["header"]).tolist())) == 1
    with open(path, "rb") as file:
        data = file.read()
    header = data[int(table["header"][5]):int(table["header"][5] + table["header_length"][5])]
    assert b"  " in header and json.loads(header)["d"][0][0] == "d"


@pytest.mark.parametrize("change", ["shape", "non-contiguous", "int for a float", "key order", "bool key",
                                    "big idx", "big int", "another string", "bytes"])
def test_a_batch_of_mixed_structures_is_not_encoded_as_one(tmp_path, change):
    indices, values = list(range(30)), [{"x": np.arange(6.0).reshape(2, 3) + i, "s": 0.5, "n": 1, 2: "a"}
                                         for i in range(30)]
    odd = values[17]
    if change == "shape":
        odd["x"] = np.zeros((3, 2))
    elif change == "non-contiguous":
        odd["x"] = np.arange(12.0).reshape(2, 6)[:, ::2]
    elif change == "int for a float":
        odd["s"] = 1
    elif change == "key order":
        values[17] = {"s": 0.5, "x": odd["x"], "n": 1, 2: "a"}
    elif change == "bool key":
        values[17] = {"x": odd["x"], "s": 0.5, "n": 1, True: "a"}
    elif change == "big idx":
        indices[17] = 2**40
    elif change == "big int":
        odd["n"] = -2**31 - 1
    elif change == "another string":
        odd[2] = "b"
    else:
        odd[2] = b"a"
    assert RecordEncoder(0).records(indices, values, None) is None
    assert_page_holds(str(tmp_path / "page_0.pkl"), indices, values, in_order=False)


def test_a_batch_stops_at_the_first_record_that_fills_the_page(tmp_path):
    indices, values = list(range(50)), batch_values(50)
    limit = 17 + 9_000
    batched = RecordEncoder(17)
    start, headers, _ = batched.records(indices, values, limit)
    count = len(headers)
    fewer = RecordEncoder(17)
    fewer.records(indices[:count - 1], values[:count - 1], None)
    assert start == 17 and 1 < count < 50 and fewer.position < limit <= batched.position
    path = str(tmp_path / "page_0.pkl")
    table = write_page(path, dict(zip(indices[:count], values[:count])))
    assert table["idx"].tolist() == indices[:count] and os.path.getsize(path) > limit


def test_pages_of_one_structure_written_by_threads_at_once_keep_their_own_records(tmp_path):
    """Two page writers (the debugger's and the datapoint capture's, two runs in one process) share the cached
    plans: each batch's records are its own, however the threads interleave."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads between almost any two bytecodes
    failures: list[str] = []

    def write(thread: int) -> None:
        path = str(tmp_path / f"page_{thread}.pkl")
        page = PageFile(path, 0)
        for first in range(thread * 10_000, thread * 10_000 + 1_600, 16):
            indices = list(range(first, first + 16))
            page.append_batch(indices, [{"x": np.full(4, idx, np.float32), "n": float(idx)} for idx in indices])
            page.write_pending()
        page.seal()
        try:
            loaded = load_page(path)
        except CorruptPageError as exc:
            failures.append(str(exc))
            return
        failures.extend(f"{path}: idx {idx} holds {value}" for idx, value in loaded.items()
                        if idx // 10_000 != thread or value["n"] != idx or value["x"].tolist() != [idx] * 4)

    try:
        threads = [threading.Thread(target=write, args=(thread,)) for thread in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
    finally:
        sys.setswitchinterval(previous)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []

def test_pages_written_before_batches_still_load():
    """A page of the first format-2 encoder (``K`` opcodes, unpadded JSON numbers) reads as before."""
    path = os.path.join(os.path.dirname(__file__), "data", "page_written_before_batches.pkl")
    with open(path, "rb") as file:
        unpickled = pickle.load(file)
    for loaded in (load_page(path), unpickled):
        assert sorted(loaded) == [3, 300]
        first, second = loaded[3]["d"], loaded[300]["d"]
        np.testing.assert_array_equal(first["features"], np.arange(6, dtype=np.float32).reshape(2, 3))
        np.testing.assert_array_equal(second["features"], np.full((2, 3), -1.5, np.float32))
        assert (first["score"], first["count"], bool(first["flag"]), first["shape"]) == (0.5, 7, True, [2, 3])
        assert math.isnan(second["score"]) and second["count"] == -2**40 and not second["flag"]


def test_pages_of_batched_records_with_inline_arrays_still_load():
    """A page of the encoder before stretches: a batch's records one after the other, each with its arrays."""
    path = os.path.join(os.path.dirname(__file__), "data", "page_of_batched_records_with_inline_arrays.pkl")
    with open(path, "rb") as file:
        unpickled = pickle.load(file)
    for loaded in (load_page(path), unpickled, joblib.load(path)):
        assert list(loaded) == list(range(10, 18))
        for i, idx in enumerate(loaded):
            value = loaded[idx]["d"]
            np.testing.assert_array_equal(value["features"], np.arange(6, dtype=np.float32).reshape(2, 3) * i)
            assert (value["score"], value["count"], value["kind"]) == (i / 4, -i, "feature_map")


# ------------------------------------------------------------ O_DIRECT
def in_buffer_of_its_own(array: np.ndarray) -> np.ndarray:
    """A copy of ``array`` in a mapping of its own, as a ``BufferPool`` buffer is: it starts a 4 KiB block."""
    copy = np.frombuffer(mmap.mmap(-1, array.nbytes), array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


def aligned_batches(count: int, shape: tuple[int, ...] = (32, 4, 64, 64)) -> list[tuple[list[int], list, dict]]:
    """Batches of attention-like weights as ``AttentionDebugger`` hands them over: copied into ``BufferPool``
    buffers, split into rows (the default: 32 rows of 64 KiB, a stretch of 2 MiB)."""
    pool, batches = BufferPool(), []
    for number in range(count):
        weights = torch.rand(*shape, generator=torch.Generator().manual_seed(number))
        rows, batch_value = split_batch_value({"attention": pool.copy_of(weights)}, shape[0])
        batches.append((list(range(shape[0] * number, shape[0] * (number + 1))), rows, batch_value))
    return batches


def write_batches(path: str, batches: list, direct_io: bool = True) -> None:
    page = PageFile(path, 0, direct_io=direct_io)
    for indices, rows, batch_value in batches:
        page.append_batch(indices, rows, None, batch_value)
        page.write_pending()
    page.seal()


def assert_batches_read_back(path: str, batches: list) -> None:
    for reader in (load_page, joblib.load):
        page = reader(path)
        assert all(np.array_equal(page[idx]["attention"], row["attention"])
                   for indices, rows, _ in batches for idx, row in zip(indices, rows))


def stretch_blocks(path: str, batches: list) -> list[np.ndarray]:
    """The 4 KiB blocks of each batch's stretch (from its first record's header), checked to start a block."""
    table = {int(row["idx"]): row for row in page_table(path)}
    with open(path, "rb") as file:
        data = file.read()
    blocks = []
    for indices, rows, _ in batches:
        row = table[indices[0]]
        header = json.loads(data[int(row["header"]):int(row["header"] + row["header_length"])])
        (name, (tag, (offset, *_))), = [(pair[0], *pair[1].items()) for pair in header["d"]]
        assert (name, tag) == ("attention", "r") and offset % 4096 == 0
        blocks.append(np.arange(offset // 4096, (offset + len(rows) * rows[0]["attention"].nbytes) // 4096))
    return blocks


def test_big_stretches_that_start_a_block_in_memory_go_to_disk_without_the_page_cache(direct_folder):
    """A stretch of 2 MiB or more in a buffer of its own starts a 4 KiB block in the file and is written with
    O_DIRECT: none of its blocks is left in the page cache. The same arrays in ordinary memory go through the
    page cache; both pages read back equal, with Lantern's reader and with joblib."""
    batches = aligned_batches(4)
    direct, buffered = str(direct_folder / "page_0.pkl"), str(direct_folder / "page_1.pkl")
    write_batches(direct, batches)
    write_batches(buffered, [(indices, [{"attention": np.array(row["attention"])} for row in rows], None)
                             for indices, rows, _ in batches])
    cached = resident_blocks(direct)  # before any read brings blocks in
    assert resident_blocks(buffered).mean() > 0.9  # (all of it, unless memory is short)
    assert not any(cached[blocks].any() for blocks in stretch_blocks(direct, batches))
    assert_batches_read_back(direct, batches)
    assert_batches_read_back(buffered, batches)


def test_a_page_holds_the_same_bytes_with_o_direct_or_without(direct_folder):
    """Stretches that end within a block (33 rows of 65 KiB: the last block's tail goes through the page cache)
    and datetimes (no format a memoryview can cast): the page's bytes are those of ``direct_io=False``."""
    batches = aligned_batches(3, (33, 4, 64, 65))
    stamps = in_buffer_of_its_own(np.arange(8 * 32768).astype("M8[ns]").reshape(8, 32768))
    rows, batch_value = split_batch_value({"attention": stamps}, 8)
    batches.append((list(range(100, 108)), rows, batch_value))
    write_batches(str(direct_folder / "page_0.pkl"), batches)
    write_batches(str(direct_folder / "page_1.pkl"), batches, direct_io=False)
    assert not resident_blocks(str(direct_folder / "page_0.pkl"))[stretch_blocks(str(direct_folder / "page_0.pkl"),
                                                                                 batches[:1])[0][:-1]].any()
    assert filecmp.cmp(direct_folder / "page_0.pkl", direct_folder / "page_1.pkl", shallow=False)
    assert_batches_read_back(str(direct_folder / "page_0.pkl"), batches)


def test_o_direct_is_used_only_on_the_file_systems_of_local_disks(direct_folder, tmp_path_factory):
    """ext4 and XFS take O_DIRECT writes plainly; elsewhere (tmpfs here; NFS, FUSE, btrfs, ZFS) a page goes
    through the page cache, and ``direct_io=False`` asks for that anywhere."""
    for folder, direct_io, expected in ((direct_folder, True, True), (direct_folder, False, False),
                                        ("/dev/shm", True, False)):
        if not os.path.isdir(folder):
            continue
        page = PageFile(os.path.join(folder, f"page_{os.getpid()}.pkl"), 0, direct_io=direct_io)
        try:
            assert (page._file.direct is not None) is expected, (folder, direct_io)
        finally:
            page.discard()


@pytest.mark.parametrize("refusal", [errno.EINVAL, errno.EOPNOTSUPP])
def test_a_page_goes_through_the_page_cache_where_o_direct_writes_are_refused(direct_folder, monkeypatch, refusal):
    """A file system that takes the O_DIRECT open but refuses its writes gets the page through the page cache."""
    batches = aligned_batches(3)
    real_pwrite = os.pwrite

    def refusing_pwrite(fd, data, offset):
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            raise OSError(refusal, os.strerror(refusal))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", refusing_pwrite)
    path = str(direct_folder / "page_0.pkl")
    write_batches(path, batches)
    assert resident_blocks(path).mean() > 0.9
    assert_batches_read_back(path, batches)
