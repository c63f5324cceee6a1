"""Write files so that a reader (or a crash) never sees half of one.

Each writer writes to a hidden temporary name in the destination folder and
renames it into place with ``os.replace``, which is atomic on POSIX: the file is
either the old complete version, the new complete version, or absent.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable
from typing import Any

TEMP_MARKER = ".tmp-"


def temporary_path(path: str) -> str:
    """A hidden name beside ``path`` that no reader's glob matches.

    Unique per process and thread, so two threads writing one file never share a temporary file.
    """
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}{TEMP_MARKER}{os.getpid()}-{threading.get_ident()}")


def atomic_write(path: str, write: Callable[[str], None]) -> None:
    """Call ``write(temp_path)`` and move the result to ``path``; clean up on failure.

    A failed cleanup never hides the error that caused it.
    """
    temp = temporary_path(path)
    try:
        write(temp)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temp)
        raise


def write_all(fd: int, data: Any) -> None:
    """Write every byte of ``data`` (a buffer) to ``fd``: after a short write, the rest is written."""
    view = memoryview(data).cast("B")
    while view:
        view = view[os.write(fd, view):]


def write_new_file(path: str, data: bytes) -> None:
    """``data`` as the whole of ``path``, with plain system calls: for a small file rewritten often (an index
    after every page), where a Python file object costs more than the write."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)


def write_json_file(path: str, obj: Any, indent: int | None = 2) -> None:
    """Plain JSON write (the writer inside ``atomic_write``); ``indent=None`` keeps big files compact."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=indent)


def atomic_write_json(path: str, obj: Any, indent: int | None = 2) -> None:
    atomic_write(path, lambda temp: write_json_file(temp, obj, indent))


def atomic_torch_save(obj: Any, path: str) -> None:
    import torch  # here, not at the top: readers of run folders (the viewer, the export) never import torch

    atomic_write(path, lambda temp: torch.save(obj, temp))


def read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)
