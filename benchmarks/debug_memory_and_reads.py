"""Opening one datapoint, page writes and peak memory of capture, against the hand-written floor.

* **Open one datapoint** of epochs of two sizes, at two page sizes: a fresh
  ``load_debug_outputs`` (index and locations read) and the datapoint's array summed,
  against ``numpy.load(batch file, mmap_mode='r')[row].sum()``; also the bytes each open
  read (``/proc/self/io``). Target (DESIGN.md): <= 2x the floor, flat in page and epoch size.
* **Page writes**: a page of 1,024 small arrays with ``write_page`` against
  ``numpy.save`` of the same bytes. Target: >= 0.9x.
* **Peak RSS** of an evaluation loop capturing one layer (64 KiB per datapoint), each run
  in its own process (``ru_maxrss``), above the same loop without capture: Lantern at
  two page sizes and the floor. Target: <= 2 batches of outputs + 32 MB, whatever the page size.

    python -m benchmarks.debug_memory_and_reads           # quick sizes: a few minutes on 2 cores
    python -m benchmarks.debug_memory_and_reads --full    # the issue's sizes (0.2 / 2 GB epochs, 1 GiB capture)
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
from debuggers.batch_split import split_batch
from debuggers.page_format import write_page
from debuggers.page_store import PageWriter
from models import SmallCNN
from runners.eval_viewer.backend.initialization import load_debug_outputs

MB = 2**20
BATCH = 64
ROW_SHAPE = (16, 32, 32)  # backbone.layer1 of SmallCNN at 64 px: 64 KiB per datapoint
ROW_BYTES = int(np.prod(ROW_SHAPE)) * 4
LAYER = "backbone.layer1"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
            writer.start_epoch(os.path.join(root, f"pages_{page_mb}", "debugger"))
            for start in range(0, datapoints, BATCH):
                rows = split_batch({"features": torch.from_numpy(batch + start)}, BATCH)
                writer.add_converted(list(range(start, start + BATCH)), [{"d": row} for row in rows])
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
def write_throughput(folder: str, arrays: int, array_kb: int, rounds: int) -> tuple[float, float]:
    """MB/s of ``write_page`` (``arrays`` arrays of ``array_kb``) and of ``numpy.save`` of the same bytes.

    Each write goes to a new file, as pages of a new epoch do (renaming over an existing file would make
    ext4 flush the new one first); the files are removed between rounds, outside the timing."""
    values = [np.random.rand(array_kb * 1024 // 4).astype(np.float32) for _ in range(arrays)]
    page = {i: {"features": {"features": a}} for i, a in enumerate(values)}
    stacked = np.stack(values)
    names = itertools.count()

    def fresh(write: Callable[[str], Any]) -> Callable[[], Any]:
        return lambda: write(os.path.join(folder, f"write_{next(names)}"))

    def clean() -> None:
        for name in os.listdir(folder):
            if name.startswith("write_"):
                os.remove(os.path.join(folder, name))

    medians = interleaved_medians({
        "page": fresh(lambda path: write_page(path + ".pkl", page)),
        "save": fresh(lambda path: np.save(path + ".npy", stacked)),
    }, rounds, between_rounds=clean)
    size_mb = stacked.nbytes / MB
    return size_mb / medians["page"], size_mb / medians["save"]


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
    args = parser.parse_args()
    epochs_gb, capture_gb = ([0.2, 2.0], 1.0) if args.full else ([0.1, 0.5], 0.25)
    page_sizes_mb = [16, 100]
    root = tempfile.mkdtemp(prefix="lantern-bench-", dir=args.dir)
    try:
        print(f"Open one datapoint ({ROW_BYTES // 1024} KiB), fresh mapping each time; median of interleaved rounds")
        for gb in epochs_gb:
            datapoints = int(gb * 2**30 / ROW_BYTES) // BATCH * BATCH
            folder = os.path.join(root, f"epoch_{gb}")
            write_epochs(folder, datapoints, page_sizes_mb)
            figures = read_figures(folder, datapoints, page_sizes_mb, opens=40, rounds=9)
            floor_ms = figures["floor"]["ms"]
            for name, figure in figures.items():
                extra = f", {figure['bytes'] / 1024:.1f} KiB read" if "bytes" in figure else ""
                print(f"  {gb:g} GB epoch, {name:12s} {figure['ms']:.3f} ms  ratio to floor "
                      f"{figure['ms'] / floor_ms:.2f}{extra}")
            shutil.rmtree(folder)
        for array_kb in (16, 64):
            page_rate, save_rate = write_throughput(root, 1024, array_kb, rounds=9)
            print(f"Page of 1024 arrays of {array_kb} KiB: write_page {page_rate:.0f} MB/s vs numpy.save "
                  f"{save_rate:.0f} MB/s: ratio {page_rate / save_rate:.2f} (target >= 0.9)")
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
