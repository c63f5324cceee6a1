"""Opening one datapoint, page writes and peak memory of capture, against the hand-written floor.

* **Open one datapoint** of epochs of two sizes, at two page sizes: a fresh
  ``load_debug_outputs`` (index and locations read) and the datapoint's array summed,
  against ``numpy.load(batch file, mmap_mode='r')[row].sum()``; also the bytes each open
  read (``/proc/self/io``). Target: <= 2x the floor, flat in page and epoch size.
* **Page writes**: a page of 1,024 small arrays (16 and 64 KiB) with ``write_page``, and
  through the trainer's page writer (batches of 64) as an epoch of one page and page after
  page in an epoch of four, against ``numpy.save`` of the same bytes, wall and CPU time.
  Target: >= 0.9x.
* **Peak RSS** of an evaluation loop capturing one layer (64 KiB per datapoint), each run
  in its own process (``ru_maxrss``), above the same loop without capture: Lantern at
  two page sizes and the floor. Target: <= 2 batches of outputs + 32 MB, whatever the page size.

    python -m benchmarks.debug_memory_and_reads           # quick sizes: a few minutes on 2 cores
    python -m benchmarks.debug_memory_and_reads --full    # the issue's sizes (0.2 / 2 GB epochs, 1 GiB capture)
    python -m benchmarks.debug_memory_and_reads --writes --rounds 21   # only the page writes
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from benchmarks.common import (
    FloorWriter,
    RawFeatures,
    bytes_read,
    floor_hook,
    floor_read,
    interleaved_medians,
    lantern,
    run_loop,
)
from data.datasets import SyntheticShapesDataset, collate_datapoints
from debuggers.batch_split import split_batch_value
from debuggers.pages.buffer_pool import BufferPool
from debuggers.pages.encoding import RecordEncoder
from debuggers.pages.file_format import RESERVE_STEP, PageFile, reserve_blocks, write_page
from debuggers.pages.reader import load_debug_outputs
from debuggers.pages.writer import PageWriter
from models import SmallCNN
from run_dir.names import DEBUGGER_DIR

MB = 2**20
BATCH = 64
ROW_SHAPE = (16, 32, 32)  # backbone.layer1 of SmallCNN at 64 px: 64 KiB per datapoint
ROW_BYTES = int(np.prod(ROW_SHAPE)) * 4
LAYER = "backbone.layer1"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


WriterBatch = tuple[list[int], list[dict], dict]  # indices, their outputs, the batch value


def writer_batch(batch: np.ndarray, first_idx: int) -> WriterBatch:
    """One batch array's outputs as ``SequentialDebugger`` hands them to the page writer: the batch's indices,
    its rows split from the array, and its batch value."""
    rows, batch_value = split_batch_value({"features": torch.from_numpy(batch)}, len(batch))
    return list(range(first_idx, first_idx + len(batch))), [{"d": row} for row in rows], {"d": batch_value}


# ------------------------------------------------------------------ reads
def write_epochs(root: str, datapoints: int, page_sizes_mb: list[int]) -> None:
    """The same epoch in Lantern's pages at each page size (as ``SequentialDebugger`` writes them) and
    as the floor's per-batch files."""
    rng = np.random.default_rng(0)
    batch = rng.standard_normal((BATCH, *ROW_SHAPE), dtype=np.float32)
    floor = FloorWriter(os.path.join(root, "floor"))
    for start in range(0, datapoints, BATCH):
        floor.save(torch.from_numpy(batch + start))
    for page_mb in page_sizes_mb:
        with PageWriter(page_mb * MB) as writer:
            writer.start_epoch(os.path.join(root, f"pages_{page_mb}", DEBUGGER_DIR))
            for start in range(0, datapoints, BATCH):
                writer.add_converted(*writer_batch(batch + start, start))
            writer.flush()


def lantern_read(epoch_dir: str, idx: int) -> np.ndarray:
    array = load_debug_outputs(epoch_dir)[idx]["d"]["features"]
    array.sum()
    return array


def read_figures(root: str, datapoints: int, page_sizes_mb: list[int], opens: int, rounds: int) -> dict:
    """Median ms of one open per case, and the bytes read per open (one open per case, measured alone)."""
    picks = random.Random(1).sample(range(datapoints), opens)
    def reads(read, folder: str):
        return lambda: [read(folder, i) for i in picks]

    cases = {"floor": reads(lambda folder, i: floor_read(folder, i, BATCH), os.path.join(root, "floor"))}
    for page_mb in page_sizes_mb:
        cases[f"{page_mb} MB pages"] = reads(lantern_read, os.path.join(root, f"pages_{page_mb}"))
    for case in cases.values():
        case()  # warm: page cache and first-call costs
    figures = {name: {"ms": seconds / opens * 1e3} for name, seconds in interleaved_medians(cases, rounds).items()}
    for page_mb in page_sizes_mb:
        before = bytes_read()
        lantern_read(os.path.join(root, f"pages_{page_mb}"), picks[0])
        figures[f"{page_mb} MB pages"]["bytes"] = bytes_read() - before
    return figures


# ----------------------------------------------------------------- writes
PAGES_IN_A_ROW = 4  # the pages of the epoch written page after page


def batches_of(arrays: list[np.ndarray]) -> list[WriterBatch]:
    """``arrays`` in batches of ``BATCH`` (``writer_batch``)."""
    return [writer_batch(np.stack(arrays[start:start + BATCH]), start) for start in range(0, len(arrays), BATCH)]


def page_limit(batches: list[WriterBatch], path: str) -> int:
    """A page size that ``batches`` fill exactly: the size of their page, less 8 KiB (the stretches' padding
    varies by a few hundred bytes with the arrays' addresses; one record is 16 KiB or more)."""
    page = PageFile(path, 0)
    try:
        for indices, rows, batch_value in batches:
            page.append_batch(indices, rows, None, batch_value)
        return page.size - 8 * 1024
    finally:
        page.discard()


def write_figures(folder: str, arrays: int, array_kb: int, rounds: int,
                  clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Median seconds of writing a page of ``arrays`` arrays of ``array_kb`` KiB, ten ways, and of encoding
    them, interleaved:

    * ``write_page``: one page from a ``{idx: outputs}`` dict;
    * ``writer``: what a trainer's page writer does for an epoch of one page: ``start_epoch``, one
      ``add_converted`` per batch of ``BATCH`` rows with their batch value (split from a batch array, as
      ``SequentialDebugger`` does, outside the timing), ``flush`` (the background thread writes the page, the
      locations and the index);
    * ``writer, page after page``: the same for an epoch of ``PAGES_IN_A_ROW`` pages of ``arrays`` arrays
      each (other arrays for each page), per page: the epoch's own costs shared by its pages, each page sealed
      as it fills (its locations and the index written);
    * ``writer, O_DIRECT``: ``writer`` with each batch array copied into a ``BufferPool`` buffer first (outside
      the timing), as ``AttentionDebugger`` hands its weights over: a mapping of its own, so the page writes it
      with ``O_DIRECT`` (``debuggers.pages.file_format``), not through the page cache;
    * ``writer, buffers, direct_io=False``: the same buffers through the page cache (``O_DIRECT`` off);
    * ``page alone``: what that thread does for the page itself: the batches appended to a ``PageFile`` and
      written one by one, the page sealed (no thread, no index, no locations);
    * ``page alone, a part in 1 of 8``: the same, every eighth datapoint with an output part the others lack
      (as Grad-CAM's second class): the page encodes one structure at a time;
    * ``encoding alone``: the batches' records encoded (``RecordEncoder.records``), nothing written;
    * ``save``: ``numpy.save`` of the same bytes stacked, one file;
    * ``writes alone``: the batch arrays appended to one file, their blocks reserved ``RESERVE_STEP`` ahead
      and the rest given back at the end, as the page does (``reserve_blocks``, ``write``, ``ftruncate``): the
      page's writes without the page;
    * ``save per batch``: the hand-written floor, ``numpy.save`` of each batch.

    Each write goes to a new file (or folder), as pages of a new epoch do (renaming over an existing
    file would make ext4 flush the new one first); they are removed between rounds, outside the timing."""
    torch.set_num_threads(1)
    values = [np.random.rand(array_kb * 1024 // 4).astype(np.float32) for _ in range(arrays * PAGES_IN_A_ROW)]
    page = {i: {"d": {"features": a}} for i, a in enumerate(values[:arrays])}
    stacked = np.stack(values[:arrays])
    batches = [stacked[start:start + BATCH] for start in range(0, arrays, BATCH)]
    rows = batches_of(values[:arrays])
    with_a_part = [(indices, [{"d": {**row["d"], "part": (float(i) if i % 8 == 0 else None)}}
                              for i, row in enumerate(batch_rows)], None) for indices, batch_rows, _ in rows]
    pool = BufferPool(max_buffers=len(batches), max_bytes=stacked.nbytes)
    rows_in_buffers = [writer_batch(pool.copy_of(torch.from_numpy(batch)).numpy(), start)
                       for start, batch in zip(range(0, arrays, BATCH), batches)]
    epoch_rows = batches_of(values)
    names = itertools.count()
    writer = PageWriter(100 * MB)
    cached_writer = PageWriter(100 * MB, direct_io=False)
    paging_writer = PageWriter(page_limit(rows, os.path.join(folder, "limit.pkl")))

    def fresh(write: Callable[[str], Any]) -> Callable[[], Any]:
        return lambda: write(os.path.join(folder, f"write_{next(names)}"))

    def epoch(page_writer: PageWriter, batches: list, pages: int) -> Callable[[str], None]:
        def write(path: str) -> None:
            page_writer.start_epoch(path)
            for indices, batch_rows, batch_value in batches:
                page_writer.add_converted(indices, batch_rows, batch_value)
            written = page_writer.flush()["pages"]
            if written != pages:
                raise RuntimeError(f"the epoch was written as {written} pages, not {pages}")
        return write

    def page_alone(path: str, batches: list[WriterBatch] = rows) -> None:
        page_file = PageFile(path + ".pkl", 0, writer.page_size_bytes)
        for indices, batch_rows, batch_value in batches:
            page_file.append_batch(indices, batch_rows, None, batch_value)
            page_file.write_pending()
        page_file.seal()

    def encoding_alone() -> None:
        encoder = RecordEncoder(0)
        for indices, batch_rows, batch_value in rows:
            encoder.records(indices, batch_rows, None, batch_value)
            encoder.take()

    def save_per_batch(path: str) -> None:
        os.mkdir(path)
        for number, batch in enumerate(batches):
            np.save(os.path.join(path, f"batch_{number}.npy"), batch)

    def writes_alone(path: str) -> None:
        fd = os.open(path + ".bin", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            written = reserved = 0
            for batch in batches:
                if written + batch.nbytes > reserved:
                    reserve_blocks(fd, reserved, written + RESERVE_STEP - reserved)
                    reserved = written + RESERVE_STEP
                written += os.write(fd, batch)
            os.ftruncate(fd, written)
        finally:
            os.close(fd)

    def clean() -> None:
        for name in os.listdir(folder):
            if name.startswith("write_"):
                path = os.path.join(folder, name)
                shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)

    try:
        seconds = interleaved_medians({
            "write_page": fresh(lambda path: write_page(path + ".pkl", page)),
            "writer": fresh(epoch(writer, rows, 1)),
            "writer, page after page": fresh(epoch(paging_writer, epoch_rows, PAGES_IN_A_ROW)),
            "writer, O_DIRECT": fresh(epoch(writer, rows_in_buffers, 1)),
            "writer, buffers, direct_io=False": fresh(epoch(cached_writer, rows_in_buffers, 1)),
            "page alone": fresh(page_alone),
            "page alone, a part in 1 of 8": fresh(lambda path: page_alone(path, with_a_part)),
            "encoding alone": encoding_alone,
            "save": fresh(lambda path: np.save(path + ".npy", stacked)),
            "writes alone": fresh(writes_alone),
            "save per batch": fresh(save_per_batch),
        }, rounds, between_rounds=clean, clock=clock)
    finally:
        writer.close()
        cached_writer.close()
        paging_writer.close()
        clean()
    seconds["writer, page after page"] /= PAGES_IN_A_ROW
    return seconds


def print_write_figures(folder: str, rounds: int) -> None:
    print(f"Page writes, 1024 arrays per page, median of {rounds} interleaved rounds (target: the writer >= 0.9x "
          f"numpy.save of the same bytes); load average {os.getloadavg()[0]:.1f}. 'writer': an epoch of one "
          f"page; 'writer, page after page': an epoch of {PAGES_IN_A_ROW} pages, per page")
    for array_kb in (16, 64):
        for clock, unit in ((time.perf_counter, "wall"), (time.process_time, "CPU")):
            seconds = write_figures(folder, 1024, array_kb, rounds, clock)
            ratios = ", ".join(f"{name} {seconds['save'] / value:.2f}" for name, value in seconds.items()
                               if name not in ("save", "encoding alone"))
            print(f"  {array_kb} KiB arrays, {unit:4s}: ratio to numpy.save: {ratios} (writer to the floor's save "
                  f"per batch {seconds['save per batch'] / seconds['writer']:.2f})")
            print("      ms per page: " + ", ".join(f"{name} {value * 1e3:.2f}" for name, value in seconds.items()))


# ----------------------------------------------------------------- memory
def run_epoch(folder: str, datapoints: int, mode: str, page_mb: int) -> dict:
    """One capture loop in this process; ``mode`` is 'none', 'lantern' or 'floor'. Returns peak RSS."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = SmallCNN().eval()
    dataset = SyntheticShapesDataset(num_datapoints=8 * BATCH, resolution=64, split="val")
    distinct = [collate_datapoints([dataset[i] for i in range(s, s + BATCH)]) for s in range(0, 8 * BATCH, BATCH)]
    batches = [{**distinct[(start // BATCH) % 8], "meta_info": {"idx": torch.arange(start, start + BATCH)}}
               for start in range(0, datapoints, BATCH)]
    debugger = lantern(model, folder, {"class": RawFeatures, "args": {"layer_name": LAYER}}, page_mb) \
        if mode == "lantern" else None
    hook = floor_hook(model, LAYER, folder) if mode == "floor" else None
    run_loop(model, batches, debugger)
    if hook is not None:
        hook.remove()
    if debugger is not None:
        debugger.close()
    return {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def child_epoch(folder: str, datapoints: int, mode: str, page_mb: int = 100) -> float:
    code = (f"import json; from benchmarks.debug_memory_and_reads import run_epoch; "
            f"print(json.dumps(run_epoch({folder!r}, {datapoints}, {mode!r}, {page_mb})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    shutil.rmtree(folder, ignore_errors=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_rss_mb"]


# ------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the issue's sizes (needs ~7 GB of disk, ~15 min)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the epochs are written")
    parser.add_argument("--writes", action="store_true", help="only the page writes (a minute)")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds of the page writes")
    args = parser.parse_args()
    if args.writes:
        root = tempfile.mkdtemp(prefix="lantern-bench-", dir=args.dir)
        try:
            print_write_figures(root, args.rounds)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    epochs_gb, capture_gb = ([0.2, 2.0], 1.0) if args.full else ([0.1, 0.5], 0.25)
    page_sizes_mb = [16, 100]
    root = tempfile.mkdtemp(prefix="lantern-bench-", dir=args.dir)
    try:
        print(f"Open one datapoint ({ROW_BYTES // 1024} KiB), fresh mapping each time; median of interleaved rounds")
        for gb in epochs_gb:
            datapoints = int(gb * 2**30 / ROW_BYTES) // BATCH * BATCH
            folder = os.path.join(root, f"{gb}_gb")
            write_epochs(folder, datapoints, page_sizes_mb)
            figures = read_figures(folder, datapoints, page_sizes_mb, opens=40, rounds=9)
            floor_ms = figures["floor"]["ms"]
            for name, figure in figures.items():
                extra = f", {figure['bytes'] / 1024:.1f} KiB read" if "bytes" in figure else ""
                print(f"  {gb:g} GB epoch, {name:12s} {figure['ms']:.3f} ms  ratio to floor "
                      f"{figure['ms'] / floor_ms:.2f}{extra}")
            shutil.rmtree(folder)
        print_write_figures(root, args.rounds)
        datapoints = int(capture_gb * 2**30 / ROW_BYTES) // BATCH * BATCH
        base = child_epoch(os.path.join(root, "none"), datapoints, "none")
        print(f"Peak RSS capturing {datapoints} datapoints ({capture_gb:g} GiB of {LAYER}), above no capture "
              f"({base:.0f} MB); target <= 2 batches ({2 * BATCH * ROW_BYTES / MB:.0f} MB) + 32 MB:")
        for page_mb in page_sizes_mb:
            peak = child_epoch(os.path.join(root, "lantern"), datapoints, "lantern", page_mb)
            print(f"  Lantern, {page_mb} MB pages: +{peak - base:.0f} MB")
        floor = child_epoch(os.path.join(root, "floor"), datapoints, "floor")
        print(f"  floor (hook + numpy.save per batch): +{floor - base:.0f} MB")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
