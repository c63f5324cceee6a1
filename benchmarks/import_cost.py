"""What ``from debuggers import ...`` costs a start of ``python main.py``, and what model code pays to import the
capture points.

    python -m benchmarks.import_cost --runs 7

Each measure is a fresh interpreter (``python -X importtime``), the cases interleaved in a new random order each
round, medians reported. ``main.py --help`` imports everything a run imports before it reads its config; the
``debuggers`` package's own line of ``-X importtime`` is what its ``__init__`` adds (its names are imported on
first use, so this is its own code only).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = {
    "python -c pass": ["-c", "pass"],
    "import debuggers.capture": ["-c", "import debuggers.capture"],
    "from debuggers import SequentialDebugger": ["-c", "from debuggers import SequentialDebugger"],
    "import debuggers.wrappers.sequential_debugger": ["-c", "import debuggers.wrappers.sequential_debugger"],
    "python main.py --help": ["main.py", "--help"],
}
IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|\s+(\S+)$")


def measure(args: list[str]) -> tuple[float, dict[str, int]]:
    """Wall seconds of one fresh interpreter, and each module's own import time (µs) from ``-X importtime``."""
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-X", "importtime", *args], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=300)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"{args} failed: {result.stderr[-2000:]}")
    own = {m.group(3): int(m.group(1)) for line in result.stderr.splitlines() if (m := IMPORT_LINE.search(line))}
    return wall, own


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    walls: dict[str, list[float]] = {name: [] for name in CASES}
    package_us: list[int] = []
    capture_modules: set[str] = set()
    for _ in range(args.runs):
        for name in random.sample(list(CASES), len(CASES)):
            wall, own = measure(CASES[name])
            walls[name].append(wall)
            if name == "python main.py --help":
                package_us.append(own["debuggers"])
            if name == "import debuggers.capture":
                capture_modules = set(own)
    print(f"load: {os.getloadavg()[0]:.1f}; medians of {args.runs} fresh interpreters")
    for name, values in walls.items():
        print(f"  {name:<48} {1000 * statistics.median(values):8.1f} ms")
    main_ms = 1000 * statistics.median(walls["python main.py --help"])
    package_ms = statistics.median(package_us) / 1000
    print(f"the debuggers package's own import inside main.py: {package_ms:.2f} ms "
          f"({100 * package_ms / main_ms:.2f} % of main.py's start)")
    print(f"modules 'import debuggers.capture' imports beyond the interpreter's: "
          f"{sorted(m for m in capture_modules if m.split('.')[0] in ('debuggers', 'utils', 'torch', 'numpy'))}")


if __name__ == "__main__":
    main()
