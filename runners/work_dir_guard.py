"""One run per work dir at a time, and a work dir that stays the one the run started in.

Two copies of the same command on one work dir would both resume the same epoch
and overwrite each other's files, and the second would delete the first's
temporaries. So rank 0 holds an ``fcntl.flock`` on ``<work dir>/.lantern.lock``
for the whole run; the file says who holds it (pid, host, start time, command),
so the refused copy can say so. The lock dies with its process: a killed run
leaves nothing to clean up.

A work dir deleted (or replaced) while the run is going would be recreated
half-empty by the next write; ``WorkDirWatch`` notices it before the run writes
an epoch's files and stops the run with a clear error instead.
"""

from __future__ import annotations

import fcntl
import os
import socket
import sys
import time
from typing import IO, Optional

from run_dir.names import LOCK_FILE
from utils.atomic_files import read_json
from utils.errors import WorkDirError

_HELD: dict[str, IO[str]] = {}  # real path -> lock file held by this process


def lock_work_dir(work_dir: str) -> None:
    """Take the work dir's lock, or raise ``WorkDirError`` naming the process that holds it."""
    path = os.path.join(work_dir, LOCK_FILE)
    release_work_dir(work_dir)  # an earlier runner of this process on the same dir is over
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the whole run
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip() or "a process that has not written its name yet"
        handle.close()
        raise WorkDirError(f"work dir {work_dir!r} is in use by another Lantern run ({holder}). Two runs on one "
                           "work dir would overwrite each other: wait for that run to end (or stop it), or set "
                           "another 'work_dir'") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on host {socket.gethostname()}, started "
                 f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}: {' '.join(sys.argv)}\n")
    handle.flush()
    _HELD[os.path.realpath(work_dir)] = handle


def release_work_dir(work_dir: str) -> None:
    handle = _HELD.pop(os.path.realpath(work_dir), None)
    if handle is not None:
        handle.close()


class WorkDirWatch:
    """Remembers the work dir's identity (device, inode) once it exists; ``check`` says if it is gone."""

    def __init__(self, work_dir: str, marker: str, launch: str) -> None:
        self.work_dir = work_dir
        self.marker = marker  # the run's run_info.json, which records ``launch``
        self.launch = launch
        self._stat: Optional[os.stat_result] = os.stat(work_dir)

    def check(self, about_to: str) -> None:
        """Raise ``WorkDirError`` when the work dir was deleted or replaced since the run started; where it now
        holds another run, without the advice to delete what is left."""
        try:
            same = os.path.samestat(os.stat(self.work_dir), self._stat) and os.path.isfile(self.marker)
        except OSError:
            same = False
        if same:
            return
        if os.path.isfile(self.marker) and recorded_launch(self.marker) != self.launch:
            raise WorkDirError(
                f"work dir {self.work_dir!r} was replaced while this run was using it: it now holds another run "
                f"(its {os.path.basename(self.marker)} records another launch), so this run stops before it would "
                f"{about_to}, leaving that run's files alone. Leave the folder to that run: set another 'work_dir' "
                "in this run's config and run it again to start over")
        raise WorkDirError(
            f"work dir {self.work_dir!r} was deleted or replaced while this run was using it (its "
            f"{os.path.basename(self.marker)} is gone), so the run stops before it would {about_to}: files "
            "written now would make a half-empty run that cannot be resumed. Delete what is left of the "
            "folder (or set another 'work_dir') and run the same command again to start over")


def recorded_launch(info_path: str) -> Optional[str]:
    """The launch id in a run's ``run_info.json`` (each launch records its own); None where it has none or
    cannot be read."""
    try:
        info = read_json(info_path)
    except (OSError, ValueError):
        return None
    return info.get("launch") if isinstance(info, dict) else None
