"""A crafted page whose record header is millions of empty lists: Lantern's reader against parsing that header.

The page is valid (it loads with ``pickle.load``) but its JSON header is ``{"d":[["x",[[],[],...]]]}``. Before
headers were bounded, the reader parsed it whole (``json.loads``) and rebuilt it (``_RecordReader``): tens of
times the page's size in memory, seconds per MB. The reader now counts the header's values first and refuses it.
Each case runs in its own process, its peak RSS (``VmHWM``) reset as it starts. Linux only.

    python -m benchmarks.crafted_header                  # an 11 MB page (3 million empty lists)
    python -m benchmarks.crafted_header --lists 10000000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from debuggers.pages import encoding
from debuggers.pages.file_format import (
    CorruptPageError,
    PageFile,
    _RecordReader,  # the reader's own walk of a parsed header
    load_page,
    pread_exact,
    read_footer,
)
from run_dir.run_files import open_regular

CASES = {
    "Lantern's reader (load_page)": "lantern",
    "the header parsed and rebuilt, as the reader did before": "parsed",
}


def write_crafted_page(path: str, lists: int) -> None:
    """The page another tool (or Lantern before the bound) writes: the encoder's bound lifted."""
    encoding.MAX_HEADER_NODES = 10**12
    page = PageFile(path, 0)
    page.append(0, {"x": [[] for _ in range(lists)]})
    page.seal()


def parse_the_header(path: str) -> None:
    """What the reader did before: the header parsed whole, then rebuilt as outputs."""
    fd = open_regular(path, "debug page", CorruptPageError)
    try:
        size = os.fstat(fd).st_size
        row = read_footer(fd, size, path)[0]
        tree = json.loads(pread_exact(fd, int(row["header_length"]), int(row["header"]), path).tobytes())
        _RecordReader(fd, path, int(row["start"]), int(row["header"]) - encoding.HEADER_OPCODE_BYTES).value(tree)
    finally:
        os.close(fd)


def memory_kb(field: str) -> int:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of this process, in KiB."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def one_case(case: str, path: str) -> None:
    """Run in a process of its own: prints seconds, peak RSS growth (bytes) and the outcome as JSON."""
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # the peak RSS starts again from now (the parent's, inherited through fork, is gone)
    before = memory_kb("VmRSS")
    start = time.perf_counter()
    try:
        load_page(path) if case == "lantern" else parse_the_header(path)
        outcome = "read"
    except CorruptPageError:
        outcome = "refused"
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "bytes": (memory_kb("VmHWM") - before) * 1024, "outcome": outcome}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lists", type=int, default=3_000_000)
    parser.add_argument("--case", choices=sorted(CASES.values()), help=argparse.SUPPRESS)
    parser.add_argument("--page", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        one_case(args.case, args.page)
        return
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "page_0.pkl")
        write_crafted_page(path, args.lists)
        size = os.path.getsize(path)
        print(f"a crafted page of {size / 2**20:.1f} MB ({args.lists} empty lists in one header); "
              f"load {os.getloadavg()[0]:.1f}")
        for name, case in CASES.items():
            result = subprocess.run([sys.executable, "-m", "benchmarks.crafted_header", "--case", case,
                                     "--page", path], capture_output=True, text=True, check=True)
            figures = json.loads(result.stdout)
            print(f"  {name:<56} {figures['outcome']:>8}  {figures['seconds']:6.2f} s  "
                  f"peak RSS +{figures['bytes'] / 2**20:5.0f} MB ({figures['bytes'] / size:4.1f}x the page)")


if __name__ == "__main__":
    main()
