"""Writing a run's files: a write that fails stops the run saying what to do."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

from utils.errors import WorkDirError


def write_run_file(path: str, write: Callable[[], None]) -> None:
    """Run ``write``, an atomic write of ``path``; a failed write stops the run saying what to do."""
    try:
        write()
    except (OSError, RuntimeError) as exc:  # torch.save reports a full disk as a RuntimeError
        folder = os.path.dirname(os.path.abspath(path))
        space = f"; {shutil.disk_usage(folder).free / 2**20:.1f} MB free there" if os.path.isdir(folder) else ""
        raise WorkDirError(
            f"cannot write {path} ({type(exc).__name__}: {exc}{space}). Nothing earlier is lost. Free disk space "
            "or make the folder writable (a file may stand where a folder should be), then run the same command "
            "again (training resumes after its last finished epoch)"
        ) from exc
