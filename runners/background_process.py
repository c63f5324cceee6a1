"""Lantern's own commands run apart from the process that wants their result (``python -m runners.analyze`` after a
validation epoch, ``python -m runners.embeddings`` for the viewer's map): a crash or an out-of-memory kill of the
command costs that process nothing, its memory is never that process's, and it runs at a lower priority on one
thread, so the training or the viewer keeps the machine's cores."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import IO

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THREADS = "1"  # the command's numerical libraries
NICENESS = 10


def start_apart(module: str, arguments: list[str], stderr: IO) -> subprocess.Popen:
    """``python -m <module> <arguments>`` started at a lower priority and on one thread, its errors to ``stderr``
    (a file, not a pipe: the command may outlive its caller); ``OSError`` when it cannot start."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": THREADS, "OPENBLAS_NUM_THREADS": THREADS, "MKL_NUM_THREADS": THREADS,
           "NUMBA_NUM_THREADS": THREADS}
    return subprocess.Popen([sys.executable, "-m", module, *arguments], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=stderr, preexec_fn=_lower_priority if os.name == "posix" else None)


def _lower_priority() -> None:
    os.nice(NICENESS)
