"""Rewrite a debugger folder of another page format in Lantern's current one (format 2), once.

    python -m debuggers.pages.convert logs/run/epoch_3/debugger [--page-size-mb 100]
    python -m debuggers.pages.convert logs/pylon_run/epoch_3/debugger --trust-pickles

Two kinds of folders are converted:

* Lantern's previous format (format 1, index version 1): its pages are read with the safe,
  bounded loader of ``debuggers.pages.legacy`` (nothing from them runs); only the pages its
  index names are read, by plain names inside the folder. The old folder is kept as
  ``<folder>.format1``.
* Pylon's joblib pickles (``page_*.pkl``, no index): loading them runs code, so only with
  ``--trust-pickles`` (``debuggers.pages.pickle_pages``). The old folder is kept as ``<folder>.pylon``.

The folder is never left without its pages: the converted pages are written by ``PageWriter``
into ``<folder>.converting``, synced to disk, and then swapped with the old folder in one atomic
step (``renameat2(RENAME_EXCHANGE)``), after which the old one is renamed to its backup name.
Killed at any moment, ``<folder>`` holds either the old pages or the new ones, complete; running
the same command again finishes the work. (On a file system without the atomic exchange, some
network file systems, two renames are used: a crash between them leaves ``<folder>`` missing
beside ``<folder>.converting``, complete, and the reader says to run the command again.)
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import json
import os
import re
import shutil
import sys

from debuggers.pages.errors import CorruptPageError, DebugDataError, PagesToConvertError
from debuggers.pages.file_format import INDEX_GLOB, PAGE_GLOB, load_page
from debuggers.pages.index import read_index, write_index
from debuggers.pages.legacy import LEGACY_INDEX_VERSION
from debuggers.pages.pickle_pages import page_kind, pickle_page_paths, pickle_pages_error, read_pickle_page
from debuggers.pages.reader import CONVERTING
from debuggers.pages.value_rules import UnsupportedOutputError
from debuggers.pages.values import to_page_value
from debuggers.pages.writer import PageWriter, WriterThreadError
from run_dir.run_files import open_regular
from utils.folder_glob import glob_in

_PAGE_NAME = re.compile(r"page_(?:rank\d+_)?\d+\.pkl")
BACKUPS = {"format1": ".format1", "pickles": ".pylon"}  # what the old folder is renamed to, by its kind
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)  # glibc 2.28 and later
_NO_EXCHANGE = (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP)


class AlreadyConvertedError(DebugDataError):
    """The folder is in Lantern's current page format already."""


def read_legacy_index(path: str) -> dict:
    """A format-1 index, with every page name checked to be a plain page name inside the folder."""
    with open(open_regular(path, "debug index", CorruptPageError), encoding="utf-8") as f:
        try:
            index = json.load(f)
        except ValueError as exc:
            raise CorruptPageError(f"debug index {path} is not valid JSON ({exc})") from None
    valid = (isinstance(index, dict) and index.get("version") == LEGACY_INDEX_VERSION
             and type(index.get("rank")) is int and type(index.get("world_size")) is int
             and type(index.get("complete")) is bool and isinstance(index.get("datapoints"), dict)
             and all(isinstance(name, str) and _PAGE_NAME.fullmatch(name) for name in index["datapoints"].values()))
    if not valid:
        raise CorruptPageError(f"debug index {path} is not a well-formed format-1 Lantern index (page names must "
                               "be plain names like page_3.pkl); it cannot be converted")
    return index


def folder_kind(folder: str) -> str:
    """'current' (complete format-2 indexes), 'format1', 'pickles' (Pylon's), or an error saying what it is."""
    if not os.path.isdir(folder) or os.path.islink(folder):
        raise CorruptPageError(f"{folder} is not a debugger folder (a folder of page_*.pkl files)")
    indexes = glob_in(folder, INDEX_GLOB)
    if indexes:
        try:
            current = [read_index(path) for path in indexes]
        except PagesToConvertError:
            return "format1"
        if all(index["complete"] for index in current):
            return "current"
        raise CorruptPageError(f"{folder} holds debug pages of Lantern's current format, incomplete (its run "
                               "stopped while writing them); there is nothing to convert")
    if any(page_kind(path) == "pickle" for path in glob_in(folder, PAGE_GLOB)):
        return "pickles"
    raise CorruptPageError(f"{folder} holds no index.json and no pickled page_*.pkl: there is nothing to convert")


def convert(debugger_dir: str, page_size_mb: float = 100, trust_pickles: bool = False) -> str:
    """Convert ``debugger_dir`` in place, the old folder kept beside it; returns the old folder's new path.

    A conversion cut short (killed) is finished. ``trust_pickles`` allows loading Pylon's joblib pickles, which
    runs code they name."""
    folder = os.path.normpath(debugger_dir)
    converting = folder + CONVERTING
    finished = _finish_swap(folder, converting)
    if finished is not None:
        return finished
    kind = folder_kind(folder)
    if kind == "current":
        raise AlreadyConvertedError(f"{folder} is in Lantern's current page format already: nothing to convert")
    if kind == "pickles" and not trust_pickles:
        raise pickle_pages_error(folder)
    backup = folder + BACKUPS[kind]
    if os.path.lexists(backup):
        raise FileExistsError(f"{backup} already exists: a conversion ran before; delete it to convert again")
    shutil.rmtree(converting, ignore_errors=True)  # what a conversion killed while writing left
    write = _write_format1 if kind == "format1" else _write_pickles
    try:
        write(folder, converting, max(1, int(page_size_mb * 2**20)))
    except BaseException:
        shutil.rmtree(converting, ignore_errors=True)
        raise
    _sync_folder(converting)
    _swap(folder, converting, backup)
    return backup


def _finish_swap(folder: str, converting: str) -> str | None:
    """Finish a swap that a killed conversion left half done; returns the old folder's path, or None when there
    was none to finish. The converted folder is complete before any swap starts."""
    if not os.path.isdir(converting):
        return None
    if not os.path.lexists(folder):  # killed between the two renames of ``_swap``'s fallback
        if not _is_current(converting):
            return None
        os.rename(converting, folder)
        return next((folder + suffix for suffix in BACKUPS.values() if os.path.isdir(folder + suffix)), folder)
    if not _is_current(folder):
        return None  # killed while writing: ``converting`` holds part of the new folder, written again
    backup = folder + BACKUPS[folder_kind(converting)]  # killed after the exchange: it holds the old folder
    os.rename(converting, backup)
    return backup


def _is_current(folder: str) -> bool:
    """``folder`` holds complete pages of Lantern's current format."""
    try:
        return folder_kind(folder) == "current"
    except DebugDataError:
        return False


def _swap(folder: str, converting: str, backup: str) -> None:
    """``converting`` takes ``folder``'s place in one atomic exchange, and the old folder is renamed ``backup``."""
    if _exchange(converting, folder):
        os.rename(converting, backup)
    else:
        os.rename(folder, backup)
        os.rename(converting, folder)
    _fsync(os.path.dirname(folder) or ".", os.O_RDONLY | os.O_DIRECTORY)


def _exchange(first: str, second: str) -> bool:
    """Swap two paths atomically (Linux's ``renameat2`` with ``RENAME_EXCHANGE``); False where the system or the
    file system cannot."""
    if _renameat2 is None:
        return False
    if _renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _NO_EXCHANGE:
        return False
    raise OSError(code, f"cannot swap {first} and {second}: {os.strerror(code)}")


def _sync_folder(folder: str) -> None:
    """Flush the folder's files and the folder itself to disk: what a swap makes visible survives a power cut."""
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and not os.path.islink(path):
            _fsync(path, os.O_RDONLY)
    _fsync(folder, os.O_RDONLY | os.O_DIRECTORY)


def _fsync(path: str, flags: int) -> None:
    fd = os.open(path, flags | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_format1(folder: str, converting: str, page_size_bytes: int) -> None:
    """Each rank's format-1 pages, read safely, as format-2 pages in ``converting``."""
    for index_path in glob_in(folder, INDEX_GLOB):
        index = read_legacy_index(index_path)
        with PageWriter(page_size_bytes, rank=index["rank"], world_size=index["world_size"]) as writer:
            writer.start_epoch(converting)
            by_page: dict[str, list[int]] = {}
            for idx, name in index["datapoints"].items():
                by_page.setdefault(name, []).append(int(idx))
            for name, indices in sorted(by_page.items()):
                page = load_page(os.path.join(folder, name))
                for idx in sorted(indices):
                    writer.add(idx, page[idx])
            writer.flush()
        if not index["complete"]:
            converted = os.path.join(converting, os.path.basename(index_path))
            with open(converted, encoding="utf-8") as f:
                write_index(converted, {**json.load(f), "complete": False})


def _write_pickles(folder: str, converting: str, page_size_bytes: int) -> None:
    """Pylon's pages, loaded with joblib (trusted), as format-2 pages in ``converting``; an output a page cannot
    hold becomes a note saying why."""
    pages: dict[int, str] = {}
    with PageWriter(page_size_bytes) as writer:
        writer.start_epoch(converting)
        for path in pickle_page_paths(folder):
            for idx, outputs in read_pickle_page(path):
                if idx in pages:
                    raise CorruptPageError(f"datapoint {idx} is in both {pages[idx]} and {path}: a Pylon run writes "
                                           "each datapoint once per epoch; remove the page that should not count")
                pages[idx] = path
                writer.add(idx, {str(name): _convertible(output, str(name), path, idx)
                                 for name, output in outputs.items()})
        writer.flush()


def _convertible(output: object, name: str, path: str, idx: int) -> object:
    try:
        return to_page_value(output, name)
    except UnsupportedOutputError as exc:
        return f"<not converted from {os.path.basename(path)} (datapoint {idx}): {exc}>"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("debugger_dir", help="a debugger/ folder written by an earlier Lantern, or by Pylon")
    parser.add_argument("--page-size-mb", type=float, default=100)
    parser.add_argument("--trust-pickles", action="store_true",
                        help="load Pylon's joblib pickles to convert them: unpickling runs code the files name, so "
                             "only for files you trust (your own runs)")
    args = parser.parse_args(argv)
    try:
        backup = convert(args.debugger_dir, args.page_size_mb, args.trust_pickles)
    except AlreadyConvertedError as exc:
        print(exc)
        return 0
    except (DebugDataError, OSError, KeyError, UnsupportedOutputError, WriterThreadError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"converted {args.debugger_dir}; the previous pages are in {backup} (delete it when done)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
