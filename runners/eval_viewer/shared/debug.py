"""One epoch's debug outputs (or a run's captured datapoints, in the same page format) as the viewer uses
them: thread-safe, and refreshed while being written.

``DebugOutputs`` keeps a small page cache that is not thread-safe, and Dash runs
callbacks in parallel threads, so every lookup holds the epoch's lock. The
signature of the index files tells a cached epoch from one that has grown since
(a run still validating rewrites its index after every page).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from functools import cached_property
from typing import Any, Optional

from debuggers.pages.errors import PagesToConvertError
from debuggers.pages.file_format import INDEX_GLOB, CorruptPageError, UnsafePageError
from debuggers.pages.reader import DebugOutputs
from run_dir.names import DEBUGGER_DIR
from utils.folder_glob import glob_in


class EpochDebugError(CorruptPageError):
    """An epoch's debug folder cannot be opened; shown in place of that epoch's debug outputs."""


class EpochDebug:
    """Lazy ``idx -> {debugger_name: output}`` of one epoch; opening an idx reads only its page."""

    def __init__(self, outputs: DebugOutputs) -> None:
        self._outputs = outputs
        self._lock = threading.Lock()

    @property
    def complete(self) -> bool:
        return self._outputs.complete

    @cached_property
    def indices(self) -> set[int]:
        """Every captured idx (reads the locations files); a file that cannot be read raises as ``get`` does."""
        with self._lock:
            return self._read("the debug index", lambda: set(self._outputs.locations))

    def get(self, idx: int) -> Optional[dict[str, Any]]:
        """The outputs of ``idx``, None if none were saved; page errors propagate with their message,
        and anything else a crafted index or page causes becomes a ``CorruptPageError`` naming it."""
        with self._lock:
            return self._read(f"the debug outputs of datapoint {idx}",
                              lambda: self._outputs[idx] if idx in self._outputs else None)

    def _read(self, what: str, read: Callable[[], Any]) -> Any:
        try:
            return read()
        except (CorruptPageError, UnsafePageError, OSError):
            raise
        except Exception as exc:  # the folder is data from anyone: shown in place, never a server error
            raise CorruptPageError(f"{what} in {self._outputs.debugger_dir} cannot be read ({type(exc).__name__}: "
                                   f"{exc}); rerun this epoch to rewrite its pages") from exc


def open_epoch_debug(epoch_dir: str) -> Optional[EpochDebug]:
    """The debug outputs of a trainer epoch dir or an evaluator work dir; None without any."""
    return open_pages(os.path.join(epoch_dir, DEBUGGER_DIR))


def open_pages(folder: str) -> Optional[EpochDebug]:
    """Reads the folder's index only; keeps one page in memory (the viewer caches several folders).

    Whatever is wrong in the folder (a malformed index, an unreadable unindexed page) becomes one
    ``EpochDebugError`` naming it, so the viewer shows it in place and serves everything else.
    """
    if not os.path.isdir(folder):
        return None
    try:
        return EpochDebug(DebugOutputs(folder))
    except PagesToConvertError as exc:  # pages of another format: the error says how to convert them
        raise EpochDebugError(f"the debug outputs in {folder} cannot be opened: {exc}") from exc
    except Exception as exc:  # the folder is data from anyone: any failure is shown, never a server error
        raise EpochDebugError(f"the debug outputs in {folder} cannot be opened ({type(exc).__name__}: {exc}); "
                              "scores and other epochs still show. Rerun this epoch to rewrite its pages") from exc


def index_signature(folder: str) -> tuple:
    """Names, sizes and times of a page folder's index files: cheap to read, changes with every new page."""
    signature = []
    for path in glob_in(folder, INDEX_GLOB):
        try:
            stat = os.stat(path)
        except OSError:
            continue
        signature.append((os.path.basename(path), stat.st_size, stat.st_mtime_ns))
    return tuple(signature)
