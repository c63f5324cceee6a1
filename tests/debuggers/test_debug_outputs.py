"""Reading debug outputs back: bytes read per datapoint, and crafted folders that must not stall or escape."""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
import struct
import threading
import tracemalloc

import numpy as np
import pytest
import torch

from debuggers.batch_split import split_batch_value
from debuggers.pages.convert import main as convert_main
from debuggers.pages.errors import CorruptPageError, LegacyPagesError
from debuggers.pages.file_format import LOCATION, load_page
from debuggers.pages.index import RankIndex, read_index
from debuggers.pages.writer import PageWriter
from run_dir.budget import remove_debug_outputs
from runners.eval_viewer.backend.initialization import load_debug_outputs

pytestmark = pytest.mark.timeout(30)

KB = 1024


def write_epoch(epoch_dir, sizes: dict[int, int], page_size: int, order=None) -> None:
    """One epoch whose datapoint ``idx`` holds ``sizes[idx]`` float32 values (each equal to idx)."""
    with PageWriter(page_size) as writer:
        writer.start_epoch(str(epoch_dir / "debugger"))
        for idx in order or sorted(sizes):
            writer.add(idx, {"fm": {"features": torch.full((sizes[idx],), float(idx))}, "label": f"n{idx}"})
        writer.flush()


def bytes_read() -> int:
    """Bytes this process has read through read()/pread() so far, counted by the kernel."""
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux's per-process I/O counters")
@pytest.mark.parametrize("page_size", [64 * KB, 8 * 1024 * KB])
def test_opening_one_datapoint_reads_its_own_bytes_plus_a_constant(tmp_path, page_size):
    rng = np.random.default_rng(0)
    sizes = {idx: int(rng.integers(1, 40_000)) for idx in range(300)}  # 4 B .. 160 KB each, ~6 MB in all
    write_epoch(tmp_path, sizes, page_size, order=rng.permutation(300).tolist())
    assert read_index(str(tmp_path / "debugger" / "index.json"))["sorted"] is True  # sorted once, at the end
    load_debug_outputs(str(tmp_path))[0]  # warm up: imports and first-call caches are not reads of the page
    for idx in (0, 7, 123, 299):
        before = bytes_read()
        outputs = load_debug_outputs(str(tmp_path))  # a fresh mapping each time: the index is read too
        value = outputs[idx]
        spent = bytes_read() - before
        assert value["label"] == f"n{idx}" and value["fm"]["features"].shape == (sizes[idx],)
        assert (value["fm"]["features"] == idx).all()
        own = sizes[idx] * 4
        assert own <= spent <= own + 2 * KB, (idx, own, spent)


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux's per-process I/O counters")
def test_opening_one_datapoint_of_a_batch_reads_its_own_bytes_plus_a_constant(tmp_path):
    """Batches as SequentialDebugger writes them: each slot's arrays in one stretch, the records after them."""
    sizes = [4, 3000, 40_000, 100]  # floats per datapoint, per batch of 16
    with PageWriter(256 * KB) as writer:
        writer.start_epoch(str(tmp_path / "debugger"))
        for number, size in enumerate(sizes):
            indices = list(range(16 * number, 16 * number + 16))
            batch = torch.arange(16 * number, 16 * number + 16, dtype=torch.float32)[:, None].expand(16, size)
            rows, batch_value = split_batch_value({"features": batch.contiguous()}, 16)
            writer.add_converted(indices, [{"fm": row, "label": "x"} for row in rows],
                                 {"fm": batch_value, "label": "x"})
        writer.flush()
    load_debug_outputs(str(tmp_path))[0]
    for idx in (0, 17, 40, 63):
        before = bytes_read()
        value = load_debug_outputs(str(tmp_path))[idx]
        spent = bytes_read() - before
        own = sizes[idx // 16] * 4
        assert value["fm"]["features"].shape == (sizes[idx // 16],) and (value["fm"]["features"] == idx).all()
        assert own <= spent <= own + 2 * KB, (idx, own, spent)


def test_reads_match_the_whole_page_loaders(tmp_path):
    sizes = {idx: 10 + idx for idx in range(40)}
    write_epoch(tmp_path, sizes, 2 * KB)
    outputs = load_debug_outputs(str(tmp_path))
    pages = {name: load_page(str(tmp_path / "debugger" / name)) for name in set(outputs.locations.values())}
    assert len(pages) > 3 and len(outputs) == 40 and list(outputs) == list(range(40))
    for idx, name in outputs.locations.items():
        with open(tmp_path / "debugger" / name, "rb") as f:
            pickled = pickle.load(f)  # a page is a plain pickle too
        for loaded in (outputs[idx], pages[name][idx], pickled[idx]):
            np.testing.assert_array_equal(loaded["fm"]["features"], np.full(10 + idx, idx, np.float32))
    assert 40 not in outputs and "3" not in outputs
    with pytest.raises(KeyError):
        outputs[40]


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux's per-process I/O counters")
def test_reading_page_by_page_gives_every_datapoint_once_reading_each_page_once(tmp_path):
    sizes = {idx: 500 + 37 * idx for idx in range(60)}
    write_epoch(tmp_path, sizes, 16 * KB, order=np.random.default_rng(1).permutation(60).tolist())
    outputs = load_debug_outputs(str(tmp_path))
    assert len(set(outputs.locations.values())) > 5
    pages = sum(f.stat().st_size for f in (tmp_path / "debugger").glob("page_*.pkl"))
    before = bytes_read()
    walked = list(outputs.page_by_page())
    spent = bytes_read() - before
    assert sorted(idx for idx, _ in walked) == list(range(60))
    for idx, value in walked:
        np.testing.assert_array_equal(value["fm"]["features"], np.full(sizes[idx], idx, np.float32))
        assert value["label"] == f"n{idx}"
    assert 4 * sum(sizes.values()) <= spent <= pages + 60 * LOCATION.itemsize


# ---------------------------------------------------------------- crafted folders
def test_fifo_named_like_a_page_or_index_is_refused_without_blocking(tmp_path):
    write_epoch(tmp_path, {0: 10, 1: 10}, 16)  # one datapoint per page
    folder = tmp_path / "debugger"
    os.remove(folder / "page_1.pkl")
    os.mkfifo(folder / "page_1.pkl")
    outputs = load_debug_outputs(str(tmp_path))
    assert outputs[0]["label"] == "n0"
    with pytest.raises(CorruptPageError, match="not a regular file"):
        outputs[1]
    with pytest.raises(CorruptPageError, match="not a regular file"):
        load_page(str(folder / "page_1.pkl"))
    os.remove(folder / "index.json")
    os.mkfifo(folder / "index.json")
    with pytest.raises(CorruptPageError, match="not a regular file"):
        load_debug_outputs(str(tmp_path))


def test_symlinked_page_is_refused(tmp_path):
    write_epoch(tmp_path, {0: 10}, KB)
    outside = tmp_path / "outside.pkl"
    os.replace(tmp_path / "debugger" / "page_0.pkl", outside)
    os.symlink(outside, tmp_path / "debugger" / "page_0.pkl")
    with pytest.raises(CorruptPageError, match="symlink"):
        load_debug_outputs(str(tmp_path))[0]


@pytest.mark.parametrize("change", [
    {"complete": None}, {"pages": "page_0.pkl"}, {"datapoints": "0"}, {"sorted": 1}, {"rank": 3},
    {"pages": ["../../../outside/secret.pkl"]}, {"version": 3},
])
def test_malformed_index_raises_one_clear_error(tmp_path, change):
    write_epoch(tmp_path, {0: 10}, KB)
    path = tmp_path / "debugger" / "index.json"
    index = {**json.loads(path.read_text()), **change}
    path.write_text(json.dumps({key: value for key, value in index.items() if value is not None}))
    with pytest.raises(CorruptPageError, match="index.json.*not a version-2 Lantern index"):
        load_debug_outputs(str(tmp_path))


def test_damaged_record_and_locations_are_reported_for_that_datapoint_alone(tmp_path):
    write_epoch(tmp_path, {0: 10, 1: 10, 2: 10}, KB)
    outputs = load_debug_outputs(str(tmp_path))
    page = tmp_path / "debugger" / "page_0.pkl"
    data = bytearray(page.read_bytes())
    header = data.index(b'{"d":[["fm"', data.index(b"n1"))  # datapoint 1's header
    data[header + 2] = ord("x")  # {"x": ...}: a tag Lantern never writes
    page.write_bytes(bytes(data))
    with pytest.raises(CorruptPageError, match="datapoint 1 is malformed"):
        outputs[1]
    assert outputs[0]["label"] == "n0" and outputs[2]["label"] == "n2"
    (tmp_path / "debugger" / "locations.bin").write_bytes(b"\x00" * 10)
    with pytest.raises(CorruptPageError, match="locations.bin is shorter"):
        load_debug_outputs(str(tmp_path))[0]


def test_array_of_a_batch_reaching_outside_its_batch_is_refused(tmp_path):
    with PageWriter(1024 * KB) as writer:
        writer.start_epoch(str(tmp_path / "debugger"))
        for start in (0, 8):
            rows, batch_value = split_batch_value(torch.arange(start, start + 8.0)[:, None].expand(8, 10).contiguous(),
                                                  8)
            writer.add_converted(list(range(start, start + 8)), rows, batch_value)
        writer.flush()
    page = tmp_path / "debugger" / "page_0.pkl"
    data = page.read_bytes()
    assert load_debug_outputs(str(tmp_path))[9].tolist() == [9.0] * 10
    start = data.rindex(b'{"r":[', 0, data.rindex(b'{"r":[')) + 6  # the second batch's next-to-last record
    end = data.index(b",", start)
    forged = str(int(data[start:end]) - 400).rjust(end - start).encode()  # into the first batch's stretch
    page.write_bytes(data[:start] + forged + data[end:])
    with pytest.raises(CorruptPageError, match="outside its record"):
        load_debug_outputs(str(tmp_path))[14]


def test_array_reaching_outside_its_record_is_refused(tmp_path):
    write_epoch(tmp_path, {0: 10, 1: 10}, KB)
    page = tmp_path / "debugger" / "page_0.pkl"
    data = page.read_bytes()
    start = data.index(b'"a":[', data.index(b"n1")) + 5
    end = data.index(b",", start)
    # datapoint 1's array now claims datapoint 0's bytes (same length, so the header keeps its size)
    forged = str(int(data[start:end]) - 200).rjust(end - start).encode()
    page.write_bytes(data[:start] + forged + data[end:])
    with pytest.raises(CorruptPageError, match="outside its record"):
        load_debug_outputs(str(tmp_path))[1]


def point_at_new_header(epoch_dir, idx: int, header: str, start: int) -> int:
    """Append ``header`` to page 0 as a record's header and point ``idx``'s location row at it, its arrays allowed
    anywhere from ``start``; returns the page's size before."""
    folder = epoch_dir / "debugger"
    page = folder / "page_0.pkl"
    size = page.stat().st_size
    with open(page, "ab") as f:
        f.write(header.encode() + b"0s" + b"\0" * 24)  # POP, SETITEM, then a trailer's room
    rows = np.fromfile(folder / "locations.bin", LOCATION)
    at = rows["idx"] == idx
    rows["start"][at], rows["header"][at], rows["header_length"][at] = start, size, len(header.encode())
    rows.tofile(folder / "locations.bin")
    return size


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux's per-process I/O counters")
@pytest.mark.parametrize("copies", [2, 50])
def test_arrays_of_one_record_that_overlap_are_refused_having_read_its_bytes_at_most(tmp_path, copies):
    """The review's probe: many entries of one header naming one array of nearly the whole page."""
    write_epoch(tmp_path, {0: 10, 1: 50_000}, 1024 * KB)  # one page of ~200 KB
    size = (tmp_path / "debugger" / "page_0.pkl").stat().st_size
    point_at_new_header(tmp_path, 0, json.dumps({"t": [{"a": [20, "|u1", [size - 200]]}] * copies}), 20)
    outputs = load_debug_outputs(str(tmp_path))
    before = bytes_read()
    with pytest.raises(CorruptPageError, match="datapoint 0 is malformed.*overlap.*rerun the epoch"):
        outputs[0]
    assert bytes_read() - before <= size + 2 * KB


def test_arrays_of_one_record_may_touch_but_not_overlap(tmp_path):
    write_epoch(tmp_path, {0: 10, 1: 1000}, 1024 * KB)
    empty, first, second = ({"a": [offset, "|u1", [length]]} for offset, length in ((20, 0), (20, 100), (120, 100)))
    point_at_new_header(tmp_path, 0, json.dumps({"t": [empty, first, empty, second]}), 20)
    assert [part.nbytes for part in load_debug_outputs(str(tmp_path))[0]] == [0, 100, 0, 100]
    point_at_new_header(tmp_path, 0, json.dumps({"t": [first, {"a": [119, "|u1", [100]]}]}), 20)
    with pytest.raises(CorruptPageError, match="datapoint 0 is malformed.*arrays that overlap at byte 119"):
        load_debug_outputs(str(tmp_path))[0]


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux's per-process I/O counters")
def test_a_page_whose_footer_lists_one_record_many_times_is_refused_having_read_the_page_at_most(tmp_path):
    write_epoch(tmp_path, {0: 20_000}, 1024 * KB)
    path = tmp_path / "debugger" / "page_0.pkl"
    data = path.read_bytes()
    trailer = struct.Struct("<QQ8s")
    footer, count, magic = trailer.unpack(data[-trailer.size:])
    rows = np.repeat(np.frombuffer(data, LOCATION, count, footer), 100)
    rows["idx"] = np.arange(100)  # 100 datapoints, one record
    path.write_bytes(data[:footer - 8] + struct.pack("<Q", rows.nbytes) + rows.tobytes() + b"0."
                     + trailer.pack(footer, len(rows), magic))
    before = bytes_read()
    with pytest.raises(CorruptPageError, match="page_0.pkl: its records add up to more than the file's"):
        load_page(str(path))
    assert bytes_read() - before <= path.stat().st_size + 2 * KB


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux's per-process I/O counters")
def test_reading_page_by_page_refuses_records_that_read_the_same_bytes_again_having_read_the_page_at_most(tmp_path):
    """Ten datapoints whose crafted headers each name nearly the whole page: each record alone is well formed."""
    write_epoch(tmp_path, {idx: 10 for idx in range(10)} | {10: 50_000}, 1024 * KB)  # one page of ~200 KB
    size = (tmp_path / "debugger" / "page_0.pkl").stat().st_size
    for idx in range(10):
        point_at_new_header(tmp_path, idx, json.dumps({"a": [20, "|u1", [size - 200]]}), 20)
    outputs = load_debug_outputs(str(tmp_path))
    before = bytes_read()
    with pytest.raises(CorruptPageError, match="page_0.pkl: its records add up to more than the file's"):
        list(outputs.page_by_page())
    assert bytes_read() - before <= (tmp_path / "debugger" / "page_0.pkl").stat().st_size + 20 * KB


@pytest.mark.parametrize("header", [
    '{"c":[' + "9" * 400 + ",0]}",  # a complex number beyond a float's range: OverflowError before
    '{"c":[0,-' + "9" * 400 + "]}",
    '{"d":[["x",' + "9" * 5000 + "]]}",  # beyond Python's int string limit
    '{"a":[20,"|u1",[0,' + "9" * 30 + "]]}",  # an empty array of a shape beyond NumPy's
    '{"r":[20,' + "9" * 400 + ',"<f8",[' + ",".join(["9" * 400] * 60) + "]]}",
    '{"b":[20,' + "9" * 400 + "]}",
    "[" * 100_000 + "]" * 100_000,
    '{"t":' * 70 + "1" + "}" * 70,  # deeper than MAX_DEPTH
], ids=["complex_real", "complex_imag", "int_5000_digits", "empty_huge_shape", "row_huge", "bytes_huge",
        "json_nesting", "deeper_than_max_depth"])
def test_header_values_out_of_any_range_are_a_corrupt_record(tmp_path, header):
    write_epoch(tmp_path, {0: 10}, KB)
    point_at_new_header(tmp_path, 0, header, 20)
    with pytest.raises(CorruptPageError, match="datapoint 0 is malformed.*rerun the epoch"):
        load_debug_outputs(str(tmp_path))[0]


def test_header_floats_beyond_range_read_as_infinity_and_long_strings_whole(tmp_path):
    write_epoch(tmp_path, {0: 10}, KB)
    point_at_new_header(tmp_path, 0, '{"d":[["big",1e400],["small",-1e400],["text","' + "x" * 100_000 + '"]]}', 20)
    value = load_debug_outputs(str(tmp_path))[0]
    assert value["big"] == float("inf") and value["small"] == -float("inf") and len(value["text"]) == 100_000


def test_paths_without_debug_outputs_give_none_and_the_log_says_what_was_expected(tmp_path, caplog):
    """As the seed's load_debug_outputs: None for a folder without ``debugger/``; why is logged, a warning where the
    path is a mistake, an info line for an epoch that has no full outputs."""
    write_epoch(tmp_path / "run" / "epoch_2", {0: 10}, KB)
    (tmp_path / "run" / "epoch_0").mkdir()
    (tmp_path / "run" / "epoch_1").mkdir()  # the disk budget removed its outputs
    remove_debug_outputs(str(tmp_path / "run" / "epoch_1"), 1000, 0.5)
    cases = {
        tmp_path / "nowhere": (logging.WARNING, "no such folder"),
        tmp_path / "run" / "epoch_2" / "debugger": (logging.WARNING, "pass its parent folder"),
        tmp_path / "run": (logging.WARNING, "pass one of its epoch folders with debug outputs: epoch_2"),
        tmp_path / "run" / "epoch_0": (logging.INFO, "no full debug outputs were written there.*summaries_every_epoch"),
        tmp_path / "run" / "epoch_1": (logging.INFO, r"its debug outputs were removed to stay under 0.5 GB \(config"),
    }
    for path, (level, expected) in cases.items():
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="lantern.debugger"):
            assert load_debug_outputs(str(path)) is None
        [record] = caplog.records
        assert record.levelno == level and re.search(expected, record.getMessage()), record.getMessage()
        assert record.getMessage().startswith(f"{path} holds no debug outputs: ")


def test_unindexed_pages_of_an_incomplete_epoch_are_found_and_bad_ones_reported(tmp_path):
    write_epoch(tmp_path, {0: 10, 1: 10, 2: 10}, 16)  # three pages
    folder = tmp_path / "debugger"
    index = json.loads((folder / "index.json").read_text())
    # as if killed right after page_2.pkl was renamed: the index still counts two pages and rows
    (folder / "index.json").write_text(json.dumps({**index, "complete": False, "pages": 2, "datapoints": 2}))
    (folder / "page_7.pkl").write_bytes(b"\x80\x05garbage")
    outputs = load_debug_outputs(str(tmp_path))
    assert not outputs.complete and list(outputs) == [0, 1, 2] and outputs[2]["label"] == "n2"
    assert len(outputs.errors) == 1 and "page_7.pkl" in str(outputs.errors[0])


@pytest.mark.parametrize("change", [
    {"world_size": 10**300, "rank": 10**299}, {"datapoints": 10**30}, {"pages": 10**30, "complete": False},
])
def test_index_counts_no_run_can_have_are_refused_before_a_file_is_named(tmp_path, change):
    write_epoch(tmp_path, {0: 10}, KB)
    path = tmp_path / "debugger" / "index.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    with pytest.raises(CorruptPageError, match="index.json.*out of range.*rerun the epoch"):
        load_debug_outputs(str(tmp_path))
    with pytest.raises(CorruptPageError, match="cannot be read .File name too long.; rerun the epoch"):
        read_index(str(tmp_path / ("x" * 300)))


def test_a_sparse_locations_file_under_an_inflated_count_costs_one_chunk(tmp_path):
    write_epoch(tmp_path, {0: 10, 1: 10}, KB)
    folder = tmp_path / "debugger"
    index = json.loads((folder / "index.json").read_text())
    (folder / "index.json").write_text(json.dumps({**index, "complete": False, "datapoints": 10**9}))
    os.truncate(folder / "locations.bin", 32 * 10**9)  # a hole: no disk, no content
    outputs = load_debug_outputs(str(tmp_path))
    tracemalloc.start()
    try:
        with pytest.raises(CorruptPageError, match="locations.bin has no valid location at row 2 .*rerun the epoch"):
            outputs[0]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100 * 2**20, peak  # one 32 MiB chunk, not 32 GB


def test_glob_characters_in_the_folder_find_only_its_own_unindexed_pages(tmp_path):
    write_epoch(tmp_path / "*", {0: 10, 1: 10}, 16)  # two pages, one datapoint each
    write_epoch(tmp_path / "other", {5: 10, 6: 10, 7: 10, 8: 10}, 16)
    folder = tmp_path / "*" / "debugger"
    index = json.loads((folder / "index.json").read_text())
    (folder / "index.json").write_text(json.dumps({**index, "complete": False}))
    assert RankIndex(str(folder), read_index(str(folder / "index.json"))).rows()["idx"].tolist() == [0, 1]


# ------------------------------------------------------------------ format 1
def write_format_1(folder, pages: dict[str, dict]) -> None:
    folder.mkdir(parents=True)
    for name, page in pages.items():
        (folder / name).write_bytes(pickle.dumps(page, protocol=5))
    datapoints = {str(idx): name for name, page in pages.items() for idx in page}
    (folder / "index.json").write_text(json.dumps({"version": 1, "rank": 0, "world_size": 1, "complete": True,
                                                   "pages": sorted(pages), "datapoints": datapoints}))


def test_previous_format_is_refused_with_the_command_that_converts_it(tmp_path, capsys):
    folder = tmp_path / "debugger"
    write_format_1(folder, {"page_0.pkl": {i: {"fm": np.full(3, i)} for i in range(3)},
                            "page_1.pkl": {3: {"fm": np.full(3, 3), "t": (1, "a")}}})
    with pytest.raises(LegacyPagesError, match=f"python -m debuggers.pages.convert {folder}"):
        load_debug_outputs(str(tmp_path))
    assert convert_main([str(folder)]) == 0
    outputs = load_debug_outputs(str(tmp_path))
    assert outputs.complete and list(outputs) == [0, 1, 2, 3] and outputs[3]["t"] == (1, "a")
    np.testing.assert_array_equal(outputs[2]["fm"], [2, 2, 2])
    assert (tmp_path / "debugger.format1" / "page_0.pkl").exists() and "format1" in capsys.readouterr().out


def test_previous_format_index_naming_a_path_outside_is_not_converted(tmp_path):
    folder = tmp_path / "debugger"
    write_format_1(folder, {"page_0.pkl": {0: {"x": 1}}})
    index = json.loads((folder / "index.json").read_text())
    (folder / "index.json").write_text(json.dumps({**index, "datapoints": {"0": "../../../etc/passwd"}}))
    assert convert_main([str(folder)]) == 2
    assert not (tmp_path / "debugger.format1").exists()


def memo_bomb(levels: int) -> bytes:
    """A format-1 page whose nested lists double at each level through memo references (~20 bytes a level)."""
    body = b"\x80\x05}K\x00]\x940"  # the page {}, the key 0, a list kept as memo 0
    for level in range(levels):
        get = b"h" + bytes([level])  # BINGET memo[level]
        body += get + get + b"\x86\x940"  # (m, m), kept as memo level+1
    return body + b"h" + bytes([levels]) + b"s."  # {0: the last level}


def test_previous_format_page_doubling_through_memo_references_is_refused_at_once(tmp_path):
    path = tmp_path / "page_0.pkl"
    path.write_bytes(memo_bomb(60))  # 2**60 leaves if walked as a tree
    result: list = []
    thread = threading.Thread(target=lambda: result.append(_refusal(path)), daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "loading a 400-byte page must not run for long"
    assert isinstance(result[0], CorruptPageError) and "reached twice" in str(result[0])


def _refusal(path) -> BaseException | None:
    try:
        load_page(str(path))
    except BaseException as exc:  # returned to the test thread
        return exc
    return None
