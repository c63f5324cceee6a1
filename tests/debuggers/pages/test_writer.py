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

from debuggers.batch_split import split_batch, split_batch_value
from debuggers.pages import file_format as page_format
from debuggers.pages.file_format import PAGE_GLOB, PageWriteError, load_page
from debuggers.pages.index import read_index
from debuggers.pages.reader import DebugOutputs
from debuggers.pages.values import UnsupportedOutputError
from debuggers.pages.writer import PageWriter, WriterThreadError
from tests.debuggers.library import page_table, wait_until
from tests.runs import REPO_ROOT

pytestmark = pytest.mark.timeout(30)


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


def slow_disk(monkeypatch, bytes_per_second: float) -> None:
    """Fault injection: a disk that writes ``bytes_per_second`` (a write takes as long as its bytes need)."""
    real_append = page_format._append

    def append(file, buffers):
        time.sleep(sum(b.nbytes if isinstance(b, np.ndarray) else len(b) for b in buffers) / bytes_per_second)
        real_append(file, buffers)

    monkeypatch.setattr(page_format, "_append", append)


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
    assert index["complete"] is True and index["pages"] == len(pages) and index["datapoints"] == 50
    assert index["rank"] == 0 and index["world_size"] == 1 and index["sorted"] is True
    for idx, tensor in originals.items():
        page = pages[next(name for name, held in pages.items() if idx in held)]
        np.testing.assert_array_equal(page[idx]["fm"], tensor.numpy())
        assert page[idx]["meta"] == {"i": idx}


def test_batches_fill_pages_as_datapoints_one_by_one_do(tmp_path, make_writer):
    """Batches of one structure are encoded at once, from their batch value or from their rows, into the same
    bytes; either way a page is sealed once full, and holds what the datapoints added one by one hold."""
    batches = [torch.randn(16, 8, 32) for _ in range(6)]
    folders = {how: tmp_path / how.replace(" ", "_") for how in ("batch value", "rows", "one by one")}
    for how, folder in folders.items():
        writer = make_writer(20_000)
        writer.start_epoch(str(folder))
        for number, batch in enumerate(batches):
            indices = list(range(16 * number, 16 * number + 16))
            rows, batch_value = split_batch_value({"fm": batch, "mean": batch.mean(dim=(1, 2)), "layer": "conv1"}, 16)
            if how == "batch value":
                writer.add_converted(indices, rows, batch_value)
            elif how == "rows":
                writer.add_converted(indices, rows)
            else:
                for idx, row in zip(indices, rows):
                    writer.add_converted([idx], [row])
        assert writer.flush()["datapoints"] == 96
    pages = {how: pages_on_disk(folder) for how, folder in folders.items()}
    assert pages["batch value"].keys() == pages["rows"].keys() and len(pages["batch value"]) > 5
    for name in pages["batch value"]:
        assert (folders["batch value"] / name).read_bytes() == (folders["rows"] / name).read_bytes()
    for how in ("batch value", "one by one"):
        sizes = [os.path.getsize(folders[how] / f"page_{n}.pkl") for n in range(len(pages[how]))]
        assert all(20_000 <= size < 20_000 + 2_000 for size in sizes[:-1]), (how, sizes)  # a datapoint: 1.1 kB
        for idx in range(96):
            page = next(page for page in pages[how].values() if idx in page)
            np.testing.assert_array_equal(page[idx]["fm"], batches[idx // 16][idx % 16].numpy())
            assert page[idx]["mean"] == batches[idx // 16][idx % 16].mean().item() and page[idx]["layer"] == "conv1"


def gradcam_like_batch(number: int, odd: list[int]) -> tuple[list[int], list]:
    """16 datapoints whose output has a part only the ``odd`` ones have (as Grad-CAM's second class), split as
    ``SequentialDebugger`` splits it, under one debugger name."""
    batch = torch.randn(16, 8, 32, generator=torch.Generator().manual_seed(number))
    rows = split_batch({"fm": batch, "mean": batch.mean(dim=(1, 2))}, 16)
    for row, value in enumerate(rows):
        value["second"] = {"cam": np.full((4, 4), row, np.float32), "target_class": row} if row in odd else None
    return list(range(16 * number, 16 * number + 16)), [{"gradcam": value} for value in rows]


def test_a_batch_of_several_structures_is_encoded_one_structure_at_a_time(tmp_path, make_writer):
    """A batch where some datapoints have an output part the others lack: the datapoints of each structure, 8
    or more, are one batch of records (one start in the locations), the others one by one; the pages and the
    epoch read back as the datapoints do, at any page size (a batch that might not fit is written in order,
    record by record, so each page still stops at the first record that fills it)."""
    batches = [gradcam_like_batch(number, odd)
               for number, odd in enumerate([[3, 9], [0, 1, 2, 3, 4, 5, 6, 7, 8], [], [15]])]
    for page_size in (100 * MB, 12_000):
        folder = tmp_path / str(page_size)
        writer = make_writer(page_size)
        writer.start_epoch(str(folder))
        for indices, rows in batches:
            writer.add_converted(indices, rows)
        assert writer.flush()["datapoints"] == 64
        epoch = DebugOutputs(str(folder))
        for indices, rows in batches:
            for idx, row in zip(indices, rows):
                read, row = epoch[idx]["gradcam"], row["gradcam"]
                np.testing.assert_array_equal(read["fm"], row["fm"])
                assert read["mean"] == row["mean"] and (read["second"] is None) == (row["second"] is None)
                if row["second"] is not None:
                    np.testing.assert_array_equal(read["second"]["cam"], row["second"]["cam"])
    [path] = glob.glob(str(tmp_path / str(100 * MB) / PAGE_GLOB))
    table = page_table(path)
    starts = {int(idx): int(start) for idx, start in zip(table["idx"], table["start"])}
    assert len({starts[idx] for idx in range(16) if idx not in (3, 9)}) == 1  # 14 alike: one batch
    assert len({starts[idx] for idx in (3, 9)}) == 2  # 2 alike: one by one
    assert len({starts[idx] for idx in range(16, 25)}) == 1 and len({starts[idx] for idx in range(25, 32)}) == 7
    assert len({starts[idx] for idx in range(32, 48)}) == 1 and sorted(starts) == list(range(64))
    sizes = sorted(os.path.getsize(path) for path in glob.glob(str(tmp_path / "12000" / PAGE_GLOB)))
    assert all(12_000 <= size < 12_000 + 2_000 for size in sizes[1:]), sizes  # a datapoint: 1.1-1.5 kB


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
    assert DebugOutputs(str(tmp_path)).locations == {0: "page_0.pkl", 1: "page_0.pkl", 2: "page_1.pkl"}


def test_ranks_write_their_own_names(tmp_path, make_writer):
    writer = make_writer(MB, rank=1, world_size=2)
    writer.start_epoch(str(tmp_path))
    writer.add(5, {"x": 1})
    writer.flush()
    assert sorted(os.listdir(tmp_path)) == ["index_rank1.json", "locations_rank1.bin", "page_rank1_0.pkl"]
    assert read_index(str(tmp_path / "index_rank1.json"))["datapoints"] == 1
    assert DebugOutputs(str(tmp_path)).locations == {5: "page_rank1_0.pkl"}


def test_epochs_in_turn_and_unflushed_epoch_is_kept_incomplete(tmp_path, make_writer):
    writer = make_writer(MB)
    writer.start_epoch(str(tmp_path / "epoch_0"))
    writer.add(0, {"x": torch.ones(3)})  # the loop crashed: no flush
    writer.start_epoch(str(tmp_path / "epoch_1"))
    writer.add(0, {"x": torch.zeros(3)})
    assert writer.flush() == {"pages": 1, "datapoints": 1, "bytes": os.path.getsize(tmp_path / "epoch_1/page_0.pkl")}
    assert read_index(str(tmp_path / "epoch_0/index.json"))["complete"] is False
    assert load_page(str(tmp_path / "epoch_0/page_0.pkl"))[0]["x"].tolist() == [1, 1, 1]
    assert read_index(str(tmp_path / "epoch_1/index.json"))["complete"] is True
    assert writer.flush()["datapoints"] == 1  # flushing twice is harmless


def test_start_epoch_removes_only_this_ranks_leftovers(tmp_path, make_writer):
    mine = ["page_rank0_0.pkl", "page_rank0_1.pkl", "index_rank0.json", ".page_rank0_2.pkl.tmp-123-456",
            "locations_rank0.bin"]
    others = ["page_rank1_0.pkl", "index_rank1.json", ".page_rank1_2.pkl.tmp-123-456", "notes.txt",
              "locations_rank1.bin"]
    for name in mine + others:
        (tmp_path / name).write_text("leftover")
    writer = make_writer(MB, rank=0, world_size=2)
    writer.start_epoch(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == sorted(others + ["index_rank0.json"])
    assert read_index(str(tmp_path / "index_rank0.json"))["pages"] == 0


def test_start_epoch_single_rank_keeps_files_of_a_multi_rank_run(tmp_path, make_writer):
    for name in ["page_0.pkl", "index.json", ".page_3.pkl.tmp-9-9", "page_rank1_0.pkl", "locations.bin"]:
        (tmp_path / name).write_text("leftover")
    make_writer(MB).start_epoch(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["index.json", "page_rank1_0.pkl"]


# -------------------------------------------------------------- failures
def test_unsupported_output_is_refused_by_add_naming_idx_and_path(tmp_path, make_writer):
    writer = make_writer(MB)
    writer.start_epoch(str(tmp_path))
    writer.add(0, {"ok": torch.zeros(3)})
    with pytest.raises(UnsupportedOutputError) as info:
        writer.add(41, {"stats": {"hist": [1, lambda: 0]}})
    message = str(info.value)
    assert "idx=41" in message and "'stats.hist[1]'" in message and "function" in message
    writer.add(42, {"ok": 1})  # the epoch goes on
    assert writer.flush()["datapoints"] == 2


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
        except WriterThreadError:
            break
    with pytest.raises(WriterThreadError) as info:
        writer.flush()
    assert str(folder / "page_0.pkl") in str(info.value) and "writable" in str(info.value)
    assert isinstance(writer.error, PageWriteError)
    assert os.listdir(tmp_path) == ["debugger"]  # no temporary file anywhere


def test_start_epoch_under_a_file_fails_clearly(tmp_path, make_writer):
    (tmp_path / "file").write_text("x")
    with pytest.raises(WriterThreadError, match="not a file"):
        make_writer(MB).start_epoch(str(tmp_path / "file" / "debugger"))


def test_dead_worker_is_reported_not_waited_for(tmp_path, make_writer, monkeypatch):
    class Fatal(BaseException):
        pass

    def explode(outputs):
        raise Fatal("worker killed")

    monkeypatch.setattr(page_format.PageFile, "append", lambda self, idx, value: explode(value))
    writer = make_writer(MB)
    writer.start_epoch(str(tmp_path))
    writer.add(0, {"x": 1})
    with pytest.raises(WriterThreadError, match="thread stopped.*worker killed"):
        writer.flush()
    assert isinstance(writer.error, Fatal)
    monkeypatch.undo()
    writer.start_epoch(str(tmp_path))  # a new epoch restarts the worker
    writer.add(0, {"x": 1})
    assert writer.flush()["datapoints"] == 1


def test_stuck_disk_raises_timeout_instead_of_hanging(tmp_path, make_writer, monkeypatch):
    release = threading.Event()
    monkeypatch.setattr(page_format, "_append", lambda file, buffers: release.wait(20))
    writer = make_writer(1024, stall_timeout_s=1.0)
    writer.start_epoch(str(tmp_path))
    writer.add(0, {"x": torch.zeros(1024)})  # fills a page: the worker is now stuck writing it
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="seems stuck"):
        writer.flush()
    assert time.monotonic() - started < 5
    release.set()


def test_a_writer_known_to_be_stuck_gives_up_at_once_until_its_disk_answers_again(tmp_path, make_writer,
                                                                                   monkeypatch):
    """After one wait of ``stall_timeout_s``, the writer is stuck: the next waits and epochs give up at once
    (a hung disk is not waited on again at every epoch), and closing does not wait for the stuck thread. Once
    the disk answers, the writer works again."""
    release = threading.Event()
    monkeypatch.setattr(page_format, "_append", lambda file, buffers, append=page_format._append:
                        release.wait(60) and append(file, buffers))
    writer = make_writer(1024, stall_timeout_s=2.0)
    writer.start_epoch(str(tmp_path / "epoch_0"))
    writer.add(0, {"x": torch.zeros(1024)})  # fills a page: the worker is now stuck writing it
    with pytest.raises(TimeoutError, match="made no progress for 2 s or more"):
        writer.flush()
    assert writer.stuck
    writer.stall_timeout_s = 3600.0  # a second wait would now hold the test until its timeout
    with pytest.raises(TimeoutError, match="seems stuck"):
        writer.flush()
    with pytest.raises(WriterThreadError, match=f"still stuck writing {tmp_path / 'epoch_0'}.*nothing is written to "
                                              f"{tmp_path / 'epoch_1'}"):
        writer.start_epoch(str(tmp_path / "epoch_1"))
    release.set()
    wait_until(lambda: not writer.stuck)
    writer.start_epoch(str(tmp_path / "epoch_1"))
    writer.add(5, {"x": np.arange(3)})
    writer.flush()
    assert DebugOutputs(str(tmp_path / "epoch_1"))[5]["x"].tolist() == [0, 1, 2]


def test_closing_a_stuck_writer_does_not_wait_for_its_thread(tmp_path, make_writer, monkeypatch):
    release = threading.Event()
    monkeypatch.setattr(page_format, "_append", lambda file, buffers: release.wait(60))
    writer = make_writer(1024, stall_timeout_s=1.0)
    writer.start_epoch(str(tmp_path))
    writer.add(0, {"x": torch.zeros(1024)})
    with pytest.raises(TimeoutError):
        writer.flush()
    started = time.monotonic()
    writer.close()
    assert time.monotonic() - started < 5  # the thread would hold close() for its 10 s join
    release.set()


def test_misuse_gets_clear_errors(tmp_path, make_writer):
    writer = make_writer(MB)
    with pytest.raises(RuntimeError, match="before start_epoch"):
        writer.add(0, {})
    writer.start_epoch(str(tmp_path))
    writer.add(3, {"x": 1})
    with pytest.raises(ValueError, match=r"meta_info\['idx'\] must be unique"):
        writer.add(3, {"x": 2})
    with pytest.raises(ValueError, match=r"idx=9 was added twice"):  # the repeated one, not the smallest
        writer.add_converted([8, 9, 4, 9], [{"x": 1}] * 4)
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
    slow_disk(monkeypatch, 3 * MB)
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
    assert writer.peak_in_flight_bytes <= page + item
    assert waited > 0.5  # add really waited for the disk
    assert alive["peak"] <= 2 * page + 3 * item  # queued + page being written + the item in hand
    assert len(pages_on_disk(tmp_path)) >= 9


def test_batches_queued_behind_a_busy_disk_are_written_together(tmp_path, make_writer, monkeypatch):
    writes = []
    real_append = page_format._append

    def busy_disk(file, buffers):
        writes.append(len(buffers))
        time.sleep(0.5)  # the first batch's write: the other batches queue up meanwhile
        real_append(file, buffers)

    monkeypatch.setattr(page_format, "_append", busy_disk)
    writer = make_writer(64 * MB)
    writer.start_epoch(str(tmp_path))
    for number in range(8):
        rows, batch_value = split_batch_value({"fm": torch.full((16, 256), float(number))}, 16)
        writer.add_converted(list(range(16 * number, 16 * number + 16)), rows, batch_value)
    assert writer.flush()["datapoints"] == 128
    assert len(writes) <= 3  # the first batch (if the thread took it alone); the others in one call; the footer
    page = load_page(str(tmp_path / "page_0.pkl"))
    assert sorted(page) == list(range(128)) and all((page[idx]["fm"] == idx // 16).all() for idx in page)


def test_huge_item_is_admitted_when_nothing_is_in_flight(tmp_path, make_writer):
    writer = make_writer(1024, max_in_flight_bytes=1024)
    writer.start_epoch(str(tmp_path))
    writer.add(0, {"big": torch.zeros(MB // 4)})
    writer.add(1, {"big": torch.zeros(MB // 4)})
    assert writer.flush()["pages"] == 2


def _open_files_under(folder) -> list[str]:
    """The files under ``folder`` that this process holds open (its fds in /proc)."""
    paths = (os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd"))
    return [path for path in paths if path.startswith(os.path.realpath(folder) + os.sep)]


def test_close_mid_page_removes_the_page_being_written_and_closes_its_files(tmp_path, make_writer):
    writer = make_writer(8 * MB)  # a page the batches do not fill: it stays open
    writer.start_epoch(str(tmp_path))
    writer.add_converted(list(range(16)), [{"x": np.full(4096, i, np.float32)} for i in range(16)])
    writer.flush()  # page 0 sealed, the locations file written
    writer.start_epoch(str(tmp_path / "next"))
    writer.add_converted(list(range(16)), [{"x": np.full(4096, i, np.float32)} for i in range(16)])
    wait_until(lambda: writer.in_flight_bytes == 0, timeout_s=10)  # written to the open page
    writer.close()  # the loop crashed: the runner closes the debugger without flushing
    assert _open_files_under(tmp_path) == []
    assert sorted(os.listdir(tmp_path / "next")) == ["index.json"]  # no hidden page with its reserved blocks
    assert sorted(os.listdir(tmp_path)) == ["index.json", "locations.bin", "next", "page_0.pkl"]


# -------------------------------------------------------------- SIGKILL
KILLED_WRITER = textwrap.dedent("""
    import sys, time
    import torch
    from debuggers.pages import file_format as page_format
    from debuggers.batch_split import split_batch, split_batch_value
    from debuggers.pages.writer import PageWriter

    real_append = page_format._append

    def slow_append(file, buffers):  # the real bytes, written slowly so the kill lands mid-page
        real_append(file, buffers)
        time.sleep(0.005)

    page_format._append = slow_append
    writer = PageWriter(64 * 1024)
    writer.start_epoch(sys.argv[1])
    batch = int(sys.argv[2])  # 1: one datapoint per add; more: batches encoded at once, pages sealed mid-batch
    i = 0
    while True:
        if batch == 1:
            writer.add(i, {"x": torch.full((2048,), float(i)), "i": i})
        else:
            ids = torch.arange(i, i + batch)
            rows = split_batch({"x": ids[:, None].float().expand(batch, 2048).contiguous(), "i": ids}, batch)
            writer.add_converted(ids.tolist(), rows)
        i += batch
""")


def _size(path) -> int:
    """A file's size; 0 once it is gone (a temporary page is renamed when sealed)."""
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


@pytest.mark.parametrize("batch", [1, 16])
def test_sigkill_mid_write_leaves_only_complete_pages(tmp_path, batch):
    folder = tmp_path / "debugger"
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    process = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(folder), str(batch)], cwd=REPO_ROOT, env=env,
                               stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and process.poll() is None:
            names = os.listdir(folder) if folder.is_dir() else []
            temps = [n for n in names if ".tmp-" in n and n.startswith(".page_")]
            if len(glob.glob(str(folder / PAGE_GLOB))) >= 3 and temps and _size(folder / temps[0]) > 0:
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
    assert index["complete"] is False and index["pages"] <= len(pages)
    outputs = DebugOutputs(str(folder))
    for idx, name in outputs.locations.items():
        assert idx in pages[name] and outputs[idx]["x"][0] == idx == pages[name][idx]["i"]
    all_idx = [idx for page in pages.values() for idx in page]
    assert len(all_idx) == len(set(all_idx)) == len(outputs)

    PageWriter(MB).start_epoch(str(folder))  # rerunning the epoch clears the debris
    assert os.listdir(folder) == ["index.json"]
