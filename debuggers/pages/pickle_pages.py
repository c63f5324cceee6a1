"""Pylon's debug pages: a ``debugger/`` folder of joblib pickles, which Lantern never opens unless told to trust them.

Pylon's ``SequentialDebugger`` saves each page with ``joblib.dump(page, 'page_{n}.pkl')``, ``page`` a dict
``{datapoint_idx: {debugger_name: output}}`` (Pylon's documents also describe a list of ``(idx, outputs)``
pairs), with no index. Loading such a page unpickles it, and unpickling runs whatever code the file names: a
reader of a run folder, which is data from anyone, must not. So the reader only looks at each page's first
bytes (``page_kind``) to say what the folder is and what to run (``pickle_pages_error``), and
``python -m debuggers.pages.convert DIR --trust-pickles`` loads them with ``joblib.load`` (``read_pickle_page``)
to rewrite them once in Lantern's page format, which is read without running anything.
"""

from __future__ import annotations

import operator
import os
import re
from typing import Any

import joblib

from debuggers.pages.errors import CorruptPageError, PicklePagesError
from debuggers.pages.file_format import PAGE_GLOB, is_page_format_2
from run_dir.run_files import open_regular
from utils.folder_glob import glob_in

# How a page starts: a pickle of protocol 2 or later, or one of the compressions joblib.dump writes and
# joblib.load reads (zlib, gzip, bz2, lzma, xz, lz4).
_PICKLE_STARTS = (b"\x80", b"x", b"\x1f\x8b", b"BZh", b"]\x00\x00", b"\xfd7zXZ", b"\x04\x22\x4d\x18")
_PAGE_NUMBER = re.compile(r"page_(\d+)\.pkl")


def page_kind(path: str) -> str:
    """'lantern' (a page in Lantern's format), 'pickle' (any other pickle: Pylon's, or Lantern's previous format),
    or 'other' (not a page, a special file or a link); reads the first bytes only."""
    try:
        fd = open_regular(path, "debug page", CorruptPageError)
    except (CorruptPageError, OSError):
        return "other"
    try:
        if is_page_format_2(fd):
            return "lantern"
        start = os.pread(fd, 8, 0)
    finally:
        os.close(fd)
    return "pickle" if start.startswith(_PICKLE_STARTS) else "other"


def pickle_pages_error(folder: str) -> PicklePagesError:
    """What a folder of pickled pages is, and the command that converts it."""
    return PicklePagesError(
        f"{folder} is a folder of Pylon/joblib pickles (page_*.pkl without Lantern's index.json), which Lantern does "
        "not open because unpickling runs code. If you trust these files (your own Pylon run wrote them), convert "
        f"them once into Lantern's page format: python -m debuggers.pages.convert {folder} --trust-pickles")


def pickle_page_paths(folder: str) -> list[str]:
    """The folder's pages in the order Pylon wrote them (page_2 before page_10)."""
    pages = [(int(match.group(1)), path) for path in glob_in(folder, PAGE_GLOB)
             if (match := _PAGE_NUMBER.fullmatch(os.path.basename(path)))]
    return [path for _, path in sorted(pages)]


def read_pickle_page(path: str) -> list[tuple[int, dict]]:
    """The ``(idx, outputs)`` of one Pylon page, loaded with ``joblib.load``: this RUNS CODE the file names, so
    only for files the user said to trust (``--trust-pickles``). A page is a dict ``{idx: outputs}`` or a list
    of ``(idx, outputs)`` pairs; an idx may be any integer (a NumPy integer, a one-element tensor)."""
    try:
        page = joblib.load(path)
    except Exception as exc:  # the file is trusted, but may be truncated or need a module that is missing
        raise CorruptPageError(f"Pylon page {path} cannot be loaded with joblib.load ({type(exc).__name__}: "
                               f"{exc}); it is truncated, or needs a module this environment lacks") from exc
    pairs = list(page.items()) if isinstance(page, dict) else page
    if not isinstance(pairs, (list, tuple)) or not all(isinstance(pair, (list, tuple)) and len(pair) == 2
                                                       for pair in pairs):
        raise CorruptPageError(f"Pylon page {path} holds a {type(page).__name__}, not a page: expected a dict "
                               "{datapoint_idx: {debugger_name: output}} or a list of (idx, outputs) pairs")
    return [(_idx(idx, path), _outputs(outputs, idx, path)) for idx, outputs in pairs]


def _idx(idx: Any, path: str) -> int:
    try:
        return operator.index(idx)
    except TypeError:
        raise CorruptPageError(f"Pylon page {path} has a datapoint idx {idx!r} ({type(idx).__name__}) that is not "
                               "an integer") from None


def _outputs(outputs: Any, idx: Any, path: str) -> dict:
    if not isinstance(outputs, dict):
        raise CorruptPageError(f"Pylon page {path}: the outputs of datapoint {idx!r} are a {type(outputs).__name__}, "
                               "not a dict {debugger_name: output}")
    return outputs
