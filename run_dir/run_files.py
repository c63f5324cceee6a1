"""A run folder's own files, read as data: regular files and folders inside it, never links, with a size cap.

A run folder may come from anyone. Lantern writes no symbolic link and no FIFO or device into one, so a
link is refused rather than followed (it can lead anywhere outside the run, and ``O_NOFOLLOW`` only
guards a path's last part), and a special file is refused rather than opened (a FIFO blocks its reader
forever). A JSON file is read up to a cap far above what Lantern writes there, so a crafted (sparse) file
costs neither minutes nor gigabytes.
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import stat
import time
from typing import Any, Optional

from run_dir.errors import RunFileError
from run_dir.names import REMOVED_MARKER
from utils.errors import LanternUserError

KIB, MIB = 1024, 1024 * 1024
MAX_MARKER_BYTES = 4 * KIB  # a removal marker is a few numbers; a larger one is not read


def open_regular(path: str, what: str, error: type[LanternUserError] = RunFileError) -> int:
    """A read-only fd of ``path`` if it is a regular file; FIFOs, devices and symlinks are refused at once with
    ``error`` (the debug pages refuse theirs with their own error)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EMLINK):
            raise error(f"{what} {path} is a symlink or a special file, never a Lantern file; "
                        "remove it and rerun the epoch") from None
        raise
    kind = os.fstat(fd).st_mode
    if not stat.S_ISREG(kind):
        os.close(fd)
        raise error(f"{what} {path} is not a regular file (a FIFO, device or folder); "
                    "Lantern never writes one: remove it and rerun the epoch")
    return fd


def link_problem(path: str, what: str) -> Optional[str]:
    """Why ``path`` is not read when it is a symbolic link, else None."""
    if not os.path.islink(path):
        return None
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return (f"{what} {path} is a symbolic link (to {target}); Lantern never writes links in a run folder, so it "
            "is not followed: put the real file or folder in its place, or remove the link")


def refuse_link(path: str, what: str, error: type[LanternUserError] = RunFileError) -> str:
    """``path`` itself, unless it is a symbolic link: then ``error`` naming the link."""
    problem = link_problem(path, what)
    if problem:
        raise error(problem)
    return path


def flock_within(fd: int, wait_s: float) -> bool:
    """Take an exclusive ``flock`` on ``fd``, tried until ``wait_s`` has passed (another process holds it for a
    short change); False when it is still held then: never a hang."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)


def lies_inside(path: str, folder: str) -> bool:
    """Whether ``path`` lies inside ``folder``, as named or with every link resolved (either of them): a config
    named inside a run folder but linked to a file elsewhere lies inside it as much as one linked into it."""
    named, real = os.path.abspath(path), os.path.realpath(path)
    roots = {os.path.abspath(folder), os.path.realpath(folder)}
    return any(os.path.commonpath([candidate, root]) == root for candidate in (named, real) for root in roots)


def read_run_json(path: str, what: str, max_bytes: int) -> Any:
    """The JSON of ``path``, a regular file of at most ``max_bytes``; ``RunFileError`` for anything else
    (a link, a FIFO, a device, a larger file, text that is not JSON). ``FileNotFoundError`` when absent."""
    fd = open_regular(path, what)
    with open(fd, "rb") as f:
        text = f.read(max_bytes + 1) if os.fstat(fd).st_size <= max_bytes else None  # a larger one is not read
    if text is None or len(text) > max_bytes:
        raise RunFileError(f"{what} {path} is larger than {max_bytes:,} bytes, far more than Lantern writes there: "
                           "it is not one Lantern wrote; remove it (or rerun to rewrite it)")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise RunFileError(f"{what} {path} is not valid JSON ({type(exc).__name__}: {str(exc)[:200]}); "
                           "remove it or rerun to rewrite it") from None


def removal_reason(epoch_dir: str) -> Optional[str]:
    """"removed to stay under N GB" when the run's disk budget removed this epoch's debug outputs
    (``run_dir/budget.py`` leaves a marker), else None. Only the budget's number is taken
    from the marker; a malformed one still says that the outputs were removed."""
    path = os.path.join(epoch_dir, REMOVED_MARKER)
    if not os.path.lexists(path):
        return None
    try:
        marker = read_run_json(path, "debug removal marker", MAX_MARKER_BYTES)
    except (OSError, ValueError):
        marker = None
    budget = _budget_gb(marker)
    if budget is not None:
        return f"removed to stay under {budget:g} GB"
    return "removed to stay under the run's disk budget"


def _budget_gb(marker: Any) -> Optional[float]:
    """The marker's budget when it is a finite number of GB (``10**400`` is not one), else None."""
    budget = marker.get("budget_gb") if isinstance(marker, dict) else None
    value = finite_or_none(budget) if type(budget) in (int, float) else None
    return value if value is not None and value >= 0 else None


def finite_or_none(value: Optional[float]) -> Optional[float]:
    """A float, or None for null, NaN, infinities and integers beyond a float (``10**400``)."""
    try:
        value = None if value is None else float(value)
    except OverflowError:
        return None
    return value if value is not None and math.isfinite(value) else None
