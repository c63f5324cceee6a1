"""PageWriter with real threads and real files: splitting, bounded memory, failures, kills."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import weakref

import numpy as np
import pytest
import torch

from debuggers import page_format
from debuggers.page_format import PAGE_GLOB, PageWriteError, load_page, read_index
from debuggers.page_store import PageWriter, PageWriterError

pytestmark = pytest.mark.timeout(30)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MB = 1 << 20


@pytest.fixture
def make_writer():
    writers: list[PageWriter] = []

    def make(*args, **kwargs) -> PageWriter:
        writers.append(PageWriter(*args, **kwargs))
        return writers[-1]

    yield make
    for writer in writers:
        writer.close()


def pages_on_disk(folder) -> dict[str, dict]:
    return {os.path.basename(p): load_page(p) for p in sorted(glob.glob(os.path.join(folder, PAGE_GLOB)))}


def slow_dump(monkeypatch, seconds: float) -> None:
    """Fault injection: every page write takes ``seconds`` longer (a slow disk)."""
    real_dump = page_format._dump

    def dump(page, path):
        time.sleep(seconds)
        real_dump(page, path)

    monkeypatch.setattr(page_format, "_dump", dump)


# ---------------------------------------------------------------- pages
def test_pages_split_at_size_and_round_trip(tmp_path, make_writer):
    item_bytes = 100_000
    originals = {i: torch.randn(item_bytes // 4) for i in range(50)}
    writer = make_writer(MB)
    writer.start_epoch(str(tmp_path))
    for i, tensor in originals.items():
        writer.add(i, {"fm": tensor, "meta": {"i": i}})
    summary = writer.flush()

    pages = pages_on_disk(tmp_path)
    assert 4 <= len(pages) <= 6 and summary["pages"] == len(pages) and summary["datapoints"] == 50
    assert summary["bytes"] == sum(os.path.getsize(tmp_path / name) for name in pages)
    for name in pages:
        assert os.path.getsize(tmp_path / name) <= MB + 2 * item_bytes
    seen = [idx for page in pages.values() for idx in page]
    assert sorted(seen) == list(range(50))
    index = read_index(str(tmp_path / "index.json"))
    assert index["complete"] is True and index["pages"] == sorted(pages, key=lambda n: int(n[5:-4]))
    assert index["rank"] == 0 and index["world_size"] == 1
    for idx, tensor in originals.items():
        page = pages[index["datapoints"][str(idx)]]
        np.testing.assert_array_equal(page[idx]["fm"], tensor.numpy())
        assert page[idx]["meta"] == {"i": idx}


def test_bfloat16_and_views_are_stored_as_small_arrays(tmp_path, make_writer):
    base = torch.randn(512, 512)
    writer = make_writer(MB)
    writer.start_epoch(str(tmp_path))
    writer.add(0, {"row": base[7], "bf16": base[:2, :3].to(torch.bfloat16)})
    writer.flush()
    page = load_page(str(tmp_path / "page_0.pkl"))
    assert page[0]["row"].nbytes == 512 * 4 and page[0]["bf16"].dtype == np.float32
    np.testing.assert_array_equal(page[0]["row"], base[7].numpy())
    np.testing.assert_array_equal(page[0]["bf16"], base[:2, :3].to(torch.bfloat16).float().numpy())
    assert os.path.getsize(tmp_path / "page_0.pkl") < 8 * 1024  # not the 1 MiB base


def test_item_larger_than_a_page_gets_its_own_page(tmp_path, make_writer):
    writer = make_writer(64 * 1024)
    writer.start_epoch(str(tmp_path))
    writer.add(0, {"small": torch.zeros(10)})
    writer.add(1, {"huge": torch.zeros(MB // 4)})
    writer.add(2, {"small": torch.zeros(10)})
    assert writer.flush()["pages"] == 2
    index = read_index(str(tmp_path / "index.json"))
    assert index["datapoints"] == {"0": "page_0.pkl", "1": "page_0.pkl", "2": "page_1.pkl"}


def test_ranks_write_their_own_names(tmp_path, make_writer):
    writer = make_writer(MB, rank=1, world_size=2)
    writer.start_epoch(str(tmp_path))
    writer.add(5, {"x": 1})
    writer.flush()
    assert sorted(os.listdir(tmp_path)) == ["index_rank1.json", "page_rank1_0.pkl"]
    assert read_index(str(tmp_path / "index_rank1.json"))["datapoints"] == {"5": "page_rank1_0.pkl"}


def test_epochs_in_turn_and_unflushed_epoch_is_kept_incomplete(tmp_path, make_writer):
    writer = make_writer(MB)
    writer.start_epoch(str(tmp_path / "epoch_0"))
    writer.add(0, {"x": torch.ones(3)})  # the loop crashed: no flush
    writer.start_epoch(str(tmp_path / "epoch_1"))
    writer.add(0, {"x": torch.zeros(3)})
    assert writer.flush() == {"pages": 1, "datapoints": 1, "bytes": os.path.getsize(tmp_path / "epoch_1/page_0.pkl"),
                              "unsupported": {}}
    assert read_index(str(tmp_path / "epoch_0/index.json"))["complete"] is False
    assert load_page(str(tmp_path / "epoch_0/page_0.pkl"))[0]["x"].tolist() == [1, 1, 1]
    assert read_index(str(tmp_path / "epoch_1/index.json"))["complete"] is True
    assert writer.flush()["datapoints"] == 1  # flushing twice is harmless


def test_start_epoch_removes_only_this_ranks_leftovers(tmp_path, make_writer):
    mine = ["page_rank0_0.pkl", "page_rank0_1.pkl", "index_rank0.json", ".page_rank0_2.pkl.tmp-123-456"]
    others = ["page_rank1_0.pkl", "index_rank1.json", ".page_rank1_2.pkl.tmp-123-456", "notes.txt"]
    for name in mine + others:
        (tmp_path / name).write_text("leftover")
    writer = make_writer(MB, rank=0, world_size=2)
    writer.start_epoch(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == sorted(others + ["index_rank0.json"])
    assert read_index(str(tmp_path / "index_rank0.json"))["pages"] == []


def test_start_epoch_single_rank_keeps_files_of_a_multi_rank_run(tmp_path, make_writer):
    for name in ["page_0.pkl", "index.json", ".page_3.pkl.tmp-9-9", "page_rank1_0.pkl"]:
        (tmp_path / name).write_text("leftover")
    make_writer(MB).start_epoch(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["index.json", "page_rank1_0.pkl"]


# -------------------------------------------------------------- failures
def test_unsupported_output_fails_at_flush_naming_idx_and_path(tmp_path, make_writer):
    writer = make_writer(MB)
    writer.start_epoch(str(tmp_path))
    writer.add(0, {"ok": torch.zeros(3)})
    writer.add(41, {"stats": {"hist": [1, lambda: 0]}})
    with pytest.raises(PageWriterError) as info:
        writer.flush()
    message = str(info.value)
    assert "idx=41" in message and "'stats.hist[1]'" in message and "function" in message
    assert isinstance(info.value.__cause__, TypeError) and writer.error is info.value.__cause__
    with pytest.raises(PageWriterError):  # raised again until the next epoch
        writer.add(42, {"ok": 1})
    writer.start_epoch(str(tmp_path / "next"))
    assert writer.error is None
    writer.add(0, {"ok": 1})
    assert writer.flush()["datapoints"] == 1


def test_unsupported_output_can_become_an_error_record_for_its_key_alone(tmp_path):
    writer = PageWriter(MB, record_unsupported=True)
    writer.start_epoch(str(tmp_path))
    writer.add(0, {"good": torch.ones(2), "bad": {"handle": object()}})
    writer.add(1, {"good": torch.zeros(2), "bad": 3})
    summary = writer.flush()
    writer.close()
    assert summary["datapoints"] == 2 and list(summary["unsupported"]) == ["bad"]
    assert "'bad.handle'" in summary["unsupported"]["bad"]
    page = load_page(str(tmp_path / "page_0.pkl"))
    assert page[0]["good"].tolist() == [1.0, 1.0]
    assert page[0]["bad"]["kind"] == "error" and page[0]["bad"]["type"] == "UnsupportedOutputError"
    assert page[1] == {"good": page[1]["good"], "bad": 3}
    assert read_index(str(tmp_path / "index.json"))["complete"] is True


def test_folder_replaced_by_file_fails_clearly(tmp_path, make_writer):
    folder = tmp_path / "debugger"
    writer = make_writer(64 * 1024)
    writer.start_epoch(str(folder))
    for name in os.listdir(folder):
        os.remove(folder / name)
    folder.rmdir()
    folder.write_text("the folder is gone")
    for i in range(20):
        try:
            writer.add(i, {"x": torch.zeros(8192)})
        except PageWriterError:
            break
    with pytest.raises(PageWriterError) as info:
        writer.flush()
    assert str(folder / "page_0.pkl") in str(info.value) and "writable" in str(info.value)
    assert isinstance(writer.error, PageWriteError)
    assert os.listdir(tmp_path) == ["debugger"]  # no temporary file anywhere


def test_start_epoch_under_a_file_fails_clearly(tmp_path, make_writer):
    (tmp_path / "file").write_text("x")
    with pytest.raises(PageWriterError, match="not a file"):
        make_writer(MB).start_epoch(str(tmp_path / "file" / "debugger"))


def test_dead_worker_is_reported_not_waited_for(tmp_path, make_writer, monkeypatch):
    class Fatal(BaseException):
        pass

    def explode(outputs):
        raise Fatal("worker killed")

    monkeypatch.setattr("debuggers.page_store.to_page_value", explode)
    writer = make_writer(MB)
    writer.start_epoch(str(tmp_path))
    writer.add(0, {"x": 1})
    with pytest.raises(PageWriterError, match="thread stopped.*worker killed"):
        writer.flush()
    assert isinstance(writer.error, Fatal)
    monkeypatch.undo()
    writer.start_epoch(str(tmp_path))  # a new epoch restarts the worker
    writer.add(0, {"x": 1})
    assert writer.flush()["datapoints"] == 1


def test_stuck_disk_raises_timeout_instead_of_hanging(tmp_path, make_writer, monkeypatch):
    release = threading.Event()
    monkeypatch.setattr(page_format, "_dump", lambda page, path: release.wait(20))
    writer = make_writer(1024, stall_timeout_s=1.0)
    writer.start_epoch(str(tmp_path))
    writer.add(0, {"x": torch.zeros(1024)})  # fills a page: the worker is now stuck writing it
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="seems stuck"):
        writer.flush()
    assert time.monotonic() - started < 5
    release.set()


def test_misuse_gets_clear_errors(tmp_path, make_writer):
    writer = make_writer(MB)
    with pytest.raises(RuntimeError, match="before start_epoch"):
        writer.add(0, {})
    writer.start_epoch(str(tmp_path))
    writer.add(3, {"x": 1})
    with pytest.raises(ValueError, match=r"meta_info\['idx'\] must be unique"):
        writer.add(3, {"x": 2})
    with pytest.raises(TypeError, match="must be a dict"):
        writer.add(4, [1, 2])
    writer.flush()
    with pytest.raises(RuntimeError, match="after flush"):
        writer.add(5, {"x": 1})
    writer.close()
    writer.close()
    with pytest.raises(RuntimeError, match="after close"):
        writer.add(6, {"x": 1})
    for bad in ({"page_size_bytes": 0}, {"page_size_bytes": 1.5}, {"page_size_bytes": 10, "rank": 2},
                {"page_size_bytes": 10, "stall_timeout_s": -1}):
        with pytest.raises(ValueError):
            PageWriter(**bad)


# -------------------------------------------------------- bounded memory
def test_slow_disk_blocks_add_and_bounds_memory(tmp_path, make_writer, monkeypatch):
    slow_dump(monkeypatch, 0.1)
    page, item = 256 * 1024, 32 * 1024
    alive = {"bytes": 0, "peak": 0}
    lock = threading.Lock()

    def released(nbytes: int) -> None:
        with lock:
            alive["bytes"] -= nbytes

    writer = make_writer(page)  # in-flight budget defaults to one page
    writer.start_epoch(str(tmp_path))
    waited = 0.0
    for i in range(80):  # 10 pages: the producer is ~10x faster than this disk
        array = np.full(item // 4, i, dtype=np.float32)  # pages keep this very object: its lifetime is measurable
        with lock:
            alive["bytes"] += item
            alive["peak"] = max(alive["peak"], alive["bytes"])
        weakref.finalize(array, released, item)
        started = time.monotonic()
        writer.add(i, {"x": array})
        waited += time.monotonic() - started
        del array
        assert writer.in_flight_bytes <= page + item
    writer.flush()
    estimate = item + page_format._ARRAY_HEADER_BYTES + page_format._CONTAINER_BYTES
    assert writer.peak_in_flight_bytes <= page + estimate
    assert waited > 0.5  # add really waited for the disk
    assert alive["peak"] <= 2 * page + 3 * item  # queued + page being written + the item in hand
    assert len(pages_on_disk(tmp_path)) >= 9


def test_huge_item_is_admitted_when_nothing_is_in_flight(tmp_path, make_writer):
    writer = make_writer(1024, max_in_flight_bytes=1024)
    writer.start_epoch(str(tmp_path))
    writer.add(0, {"big": torch.zeros(MB // 4)})
    writer.add(1, {"big": torch.zeros(MB // 4)})
    assert writer.flush()["pages"] == 2


# -------------------------------------------------------------- SIGKILL
KILLED_WRITER = textwrap.dedent("""
    import pickle, sys, time
    import torch
    from debuggers import page_format
    from debuggers.page_store import PageWriter

    def slow_dump(page, path):  # the real bytes, written slowly so the kill lands mid-file
        data = pickle.dumps(page, protocol=5)
        with open(path, "wb") as f:
            for start in range(0, len(data), 8192):
                f.write(data[start:start + 8192])
                f.flush()
                time.sleep(0.005)

    page_format._dump = slow_dump
    writer = PageWriter(64 * 1024)
    writer.start_epoch(sys.argv[1])
    i = 0
    while True:
        writer.add(i, {"x": torch.full((2048,), float(i)), "i": i})
        i += 1
""")


def test_sigkill_mid_write_leaves_only_complete_pages(tmp_path):
    folder = tmp_path / "debugger"
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    process = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(folder)], cwd=REPO_ROOT, env=env,
                               stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and process.poll() is None:
            names = os.listdir(folder) if folder.is_dir() else []
            temps = [n for n in names if ".tmp-" in n and n.startswith(".page_")]
            if len(glob.glob(str(folder / PAGE_GLOB))) >= 3 and temps and os.path.getsize(folder / temps[0]) > 0:
                break
            time.sleep(0.001)
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        _, stderr = process.communicate(timeout=10)
    assert process.returncode == -signal.SIGKILL, stderr.decode()

    names = os.listdir(folder)
    assert any(".tmp-" in n for n in names), "the kill should have hit a page being written"
    pages = pages_on_disk(folder)
    assert len(pages) >= 3
    index = read_index(str(folder / "index.json"))
    assert index["complete"] is False and set(index["pages"]) <= set(pages)
    for idx, name in index["datapoints"].items():
        assert int(idx) in pages[name] and pages[name][int(idx)]["x"][0] == int(idx)
    all_idx = [idx for page in pages.values() for idx in page]
    assert len(all_idx) == len(set(all_idx))

    PageWriter(MB).start_epoch(str(folder))  # rerunning the epoch clears the debris
    assert os.listdir(folder) == ["index.json"]
