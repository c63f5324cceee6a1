"""How a reader finds a datapoint's record without scanning: each rank's index and locations file.

Per rank, beside its pages:

* ``index.json`` (``index_rank{r}.json``), small and constant-size, rewritten atomically after
  every page: ``{'version': 2, 'rank', 'world_size', 'complete', 'pages': n, 'datapoints': n,
  'sorted'}``. Pages are named by number (``page_file_name``), so no file name is ever read
  from disk.
* ``locations.bin`` (``locations_rank{r}.bin``): ``LOCATION`` rows (32 bytes: idx, record
  start, header offset, header length, page), appended after each page is renamed into
  place. Only the first ``datapoints`` rows count (a row appended after the index was last
  written is found again in its page's footer). ``sorted`` says the rows are in increasing idx
  order, which a sequential loader gives for free; otherwise the writer sorts the file once
  when the epoch completes.

A reader binary-searches a sorted file with a few 8-byte reads, so opening a datapoint
costs the same at 200 MB or 100 GB per epoch; an unsorted file (an epoch still being
written, or cut short) is read once, and pages sealed after its index was written are
found through their footers.

Whatever a run folder holds, reading it raises ``CorruptPageError`` naming the file (never
a bare ``OSError``): an index's counts are checked against bounds before any file name or
offset is made from them, and a locations file is read a chunk at a time, each row checked
as it comes, so a crafted count over a sparse file costs one chunk, not the count's bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading

import numpy as np

from debuggers.pages.errors import CorruptPageError, DebugDataError, LegacyPagesError, PageWriteError
from debuggers.pages.file_format import (
    LOCATION,
    locations_file_name,
    page_file_name,
    page_number,
    pread_exact,
    read_footer,
)
from run_dir.run_files import open_regular
from utils.atomic_files import atomic_write, write_all, write_new_file
from utils.folder_glob import glob_in

INDEX_VERSION = 2
_MAX_INDEX_BYTES = 64 * 1024  # an index is ~150 bytes; anything much larger is not one
_IDX = np.dtype("<i8")
MAX_WORLD_SIZE = 1 << 20  # ranks; a file name is made from the rank
MAX_PAGES = 1 << 32  # a location's page number is 4 bytes
MAX_DATAPOINTS = 1 << 40  # rows per rank: a 32 TiB locations file, offsets far below 2**63
_CHUNK_ROWS = 1 << 20  # rows read at a time (32 MiB)
_INDEX_FIELDS = {"version": int, "rank": int, "world_size": int, "complete": bool, "pages": int,
                 "datapoints": int, "sorted": bool}


def write_index(path: str, index: dict) -> None:
    """Atomic JSON write: a reader never sees half an index."""
    data = json.dumps(index).encode()
    try:
        atomic_write(path, lambda temp: write_new_file(temp, data))
    except OSError as exc:
        raise PageWriteError(f"could not write debug index {path}: {exc.strerror or exc} ({type(exc).__name__}). "
                             "Free disk space, or check that the folder exists and is writable.",
                             path, exc.errno) from exc


@contextlib.contextmanager
def _read_errors(path: str, what: str):
    """An ``OSError`` of reading ``path`` (gone, unreadable, a name too long) as a ``CorruptPageError``."""
    try:
        yield
    except OSError as exc:
        raise CorruptPageError(f"{what} {path} cannot be read ({exc.strerror or exc}); rerun the epoch to "
                               "regenerate it") from None


def read_index(path: str) -> dict:
    """A validated index; any other content raises ``CorruptPageError`` (``LegacyPagesError`` for format 1)."""
    with _read_errors(path, "debug index"):
        fd = open_regular(path, "debug index", CorruptPageError)
        with open(fd, "rb") as f:
            text = f.read(_MAX_INDEX_BYTES + 1)
    try:
        index = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CorruptPageError(f"debug index {path} is not valid JSON ({exc}); rerun the epoch to rewrite it") from None
    if isinstance(index, dict) and index.get("version") == 1:
        raise LegacyPagesError(f"{os.path.dirname(path)} holds debug pages of Lantern's previous format (index "
                               f"version 1). Convert them once with: python -m debuggers.pages.convert "
                               f"{os.path.dirname(path)}")
    problems = [f"'{key}' must be {kind.__name__}" for key, kind in _INDEX_FIELDS.items()
                if not isinstance(index, dict) or type(index.get(key)) is not kind]
    if not problems and index["version"] != INDEX_VERSION:
        problems.append(f"version {index['version']} is not {INDEX_VERSION}")
    if not problems and not (0 <= index["rank"] < index["world_size"] <= MAX_WORLD_SIZE
                             and 0 <= index["pages"] <= MAX_PAGES and 0 <= index["datapoints"] <= MAX_DATAPOINTS):
        problems.append(f"rank, world_size (at most {MAX_WORLD_SIZE}), pages (at most {MAX_PAGES}) or datapoints "
                        f"(at most {MAX_DATAPOINTS}) is out of range")
    if len(text) > _MAX_INDEX_BYTES or problems:
        raise CorruptPageError(f"debug index {path} is not a version-{INDEX_VERSION} Lantern index ("
                               f"{'; '.join(problems) or 'too large'}): it was damaged, or written by another tool "
                               "or Lantern version; rerun the epoch to rewrite it")
    return index


class LocationsFile:
    """An epoch's locations file, opened for appending at its first page and kept open to its last (one open,
    not one per page). Used by the page writer's thread alone."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def append(self, rows: np.ndarray) -> None:
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o666)
            write_all(self._fd, rows.view(np.uint8))
        except OSError as exc:
            raise PageWriteError(f"could not write debug locations {self.path}: {exc.strerror or exc}. Free disk "
                                 "space, or check that the folder is writable.", self.path, exc.errno) from exc

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def sort_locations(path: str, count: int) -> None:
    """Rewrite the first ``count`` rows in idx order (atomically): reads of the finished epoch binary-search."""
    rows = np.fromfile(path, LOCATION, count)
    rows = rows[np.argsort(rows["idx"], kind="stable")]
    try:
        atomic_write(path, rows.tofile)
    except OSError as exc:
        raise PageWriteError(f"could not write debug locations {path}: {exc.strerror or exc}", path,
                             exc.errno) from exc


class RankIndex:
    """One rank's locations: ``find(idx)`` -> ``LOCATION`` row or None, reading only what it needs."""

    def __init__(self, folder: str, index: dict) -> None:
        self.folder, self.index = folder, index
        self.rank, self.world_size = index["rank"], index["world_size"]
        self.path = os.path.join(folder, locations_file_name(self.rank, self.world_size))
        self.errors: list[DebugDataError] = []  # unindexed pages that could not be read
        self._rows: np.ndarray | None = None  # every row, sorted by idx, once loaded
        self._lock = threading.Lock()

    @property
    def searchable(self) -> bool:
        """Sorted rows and nothing unindexed: a binary search in the file answers every lookup."""
        return self.index["sorted"] and self.index["complete"]

    def page_path(self, number: int) -> str:
        return os.path.join(self.folder, page_file_name(self.rank, self.world_size, number))

    def find(self, idx: int) -> np.void | None:
        if not self.searchable:
            rows = self.rows()
            at = int(np.searchsorted(rows["idx"], idx))
            return rows[at] if at < len(rows) and rows["idx"][at] == idx else None
        count = self.index["datapoints"]
        fd = self._open_locations(count)
        try:
            return self._search(fd, count, idx)
        finally:
            os.close(fd)

    def _search(self, fd: int, count: int, idx: int) -> np.void | None:
        """Binary search of the sorted rows for ``idx``: a few 8-byte reads."""
        with _read_errors(self.path, "debug locations file"):
            low, high = 0, count
            while low < high:
                middle = (low + high) // 2
                if pread_exact(fd, _IDX.itemsize, middle * LOCATION.itemsize, self.path).view(_IDX)[0] < idx:
                    low = middle + 1
                else:
                    high = middle
            if low == count:
                return None
            row = pread_exact(fd, LOCATION.itemsize, low * LOCATION.itemsize, self.path).view(LOCATION)[0]
        return row if row["idx"] == idx else None

    def rows(self) -> np.ndarray:
        """Every row, sorted by idx (read once): for listing, and for epochs still being written."""
        with self._lock:
            if self._rows is None:
                count = self.index["datapoints"]
                fd = self._open_locations(count)
                try:
                    rows = self._read_rows(fd, count)
                finally:
                    os.close(fd)
                if not self.index["complete"]:
                    rows = np.concatenate([rows, *self._unindexed_rows()])
                self._refuse_shared_headers(rows)
                self._rows = rows[np.argsort(rows["idx"], kind="stable")]
            return self._rows

    def _read_rows(self, fd: int, count: int) -> np.ndarray:
        """The first ``count`` rows, a chunk at a time, each checked before the next is read: a count over a
        sparse (or damaged) file fails at its first hole, having held one chunk."""
        chunks = []
        with _read_errors(self.path, "debug locations file"):
            for first in range(0, count, _CHUNK_ROWS):
                size = min(_CHUNK_ROWS, count - first) * LOCATION.itemsize
                chunks.append(self._checked(pread_exact(fd, size, first * LOCATION.itemsize, self.path)
                                            .view(LOCATION), first, count))
        return np.concatenate(chunks) if chunks else np.empty(0, LOCATION)

    def _checked(self, rows: np.ndarray, first: int, count: int) -> np.ndarray:
        """``rows`` when each points into an indexed page with its header after its start (as every record
        has; a hole in a sparse file reads as zeros, which is not one)."""
        bad = np.flatnonzero((rows["header"] <= rows["start"]) | (rows["page"] >= self.index["pages"]))
        if len(bad):
            raise CorruptPageError(f"debug locations file {self.path} has no valid location at row {first + bad[0]} "
                                   f"of the {count} datapoints its index lists: it is damaged, or its index "
                                   "overstates it; rerun the epoch to regenerate them")
        return rows

    def _refuse_shared_headers(self, rows: np.ndarray) -> None:
        """Every record has a header of its own: rows whose headers meet or overlap in one page would have a
        reader parse one header (of any length) once per row, work no file size bounds."""
        ordered = rows[np.lexsort((rows["header"], rows["page"]))]
        page, header = ordered["page"], ordered["header"]
        shared = np.flatnonzero((page[1:] == page[:-1]) & (header[1:] < header[:-1] + ordered["header_length"][:-1]))
        if len(shared):
            first, second = ordered[shared[0]], ordered[shared[0] + 1]
            raise CorruptPageError(
                f"debug locations file {self.path} points datapoints {int(first['idx'])} and {int(second['idx'])} at "
                f"one header (page {int(first['page'])}, byte {int(second['header'])}): Lantern never writes that; "
                "rerun the epoch to regenerate it")

    def _open_locations(self, count: int) -> int:
        if count == 0 and not os.path.lexists(self.path):
            return os.open(os.devnull, os.O_RDONLY)
        with _read_errors(self.path, "debug locations file"):
            try:
                fd = open_regular(self.path, "debug locations file", CorruptPageError)
            except FileNotFoundError:
                raise CorruptPageError(f"debug locations file {self.path} is missing although the index lists "
                                       f"{count} datapoints; rerun the epoch to regenerate it") from None
        if os.fstat(fd).st_size < count * LOCATION.itemsize:
            os.close(fd)
            raise CorruptPageError(f"debug locations file {self.path} is shorter than the {count} datapoints its "
                                   "index lists: it is truncated; rerun the epoch to regenerate it")
        return fd

    def _unindexed_rows(self) -> list[np.ndarray]:
        """Rows of pages sealed after the index was written (the run was still writing, or was killed)."""
        found = []
        pattern = page_file_name(self.rank, self.world_size, 0).replace("_0.pkl", "_*.pkl")
        for path in glob_in(self.folder, pattern):
            number = page_number(os.path.basename(path), self.rank, self.world_size)
            if number is None or number < self.index["pages"]:
                continue
            try:
                fd = open_regular(path, "debug page", CorruptPageError)
                try:
                    rows = read_footer(fd, os.fstat(fd).st_size, path).copy()
                finally:
                    os.close(fd)
            except (DebugDataError, OSError) as exc:
                self.errors.append(exc if isinstance(exc, DebugDataError) else CorruptPageError(
                    f"debug page {path} cannot be read ({exc})"))
                continue
            rows["page"] = number
            found.append(rows)
        return found
