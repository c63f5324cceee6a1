"""Read one datapoint's debug outputs, touching only that datapoint's bytes.

``load_debug_outputs(epoch_dir)`` reads the small index files of
``epoch_dir/debugger/`` and returns a mapping ``idx -> {debugger_name: output}``;
looking up an idx finds its record through the locations file and reads that
record alone (``debuggers.pages.file_format``). The same call works on a trainer's
``epoch_N`` folder and an evaluator's work dir; for a folder without ``debugger/``
it returns None, as the seed's does, and logs what the path is and what was expected.
A ``debugger/`` folder without an index raises an error saying what it holds: Pylon's
joblib pickles (never opened: see ``debuggers.pages.pickle_pages``), Lantern pages
whose index is gone, or nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any, Optional

import numpy as np

from debuggers.pages.errors import CorruptPageError, DebugDataError
from debuggers.pages.file_format import (
    INDEX_GLOB,
    PAGE_GLOB,
    ReadBudget,
    page_file_name,
    read_record,
)
from debuggers.pages.index import RankIndex, read_index
from debuggers.pages.pickle_pages import page_kind, pickle_pages_error
from run_dir import RunDir
from run_dir.names import DEBUGGER_DIR, EPOCH_TABLE_FILE, epoch_dir_name
from run_dir.run_files import open_regular, refuse_link, removal_reason
from utils.folder_glob import glob_in

logger = logging.getLogger("lantern.debugger")
CONVERTING = ".converting"  # ``debuggers.pages.convert`` writes the converted folder beside the old one, then swaps


class DebugOutputs(Mapping):
    """``idx -> outputs`` of one epoch; thread-safe, holds no page in memory.

    ``complete`` is False while the epoch is still being written (or was cut short);
    pages sealed after the last index write are then found through their footers.
    ``errors`` lists pages that could not be read while looking for such pages: the
    other datapoints stay readable.
    """

    def __init__(self, debugger_dir: str) -> None:
        # a linked folder is refused here, each of its pages when it is opened
        self.debugger_dir = refuse_link(debugger_dir, "debug page folder", CorruptPageError)
        self._ranks = [RankIndex(debugger_dir, read_index(path))
                       for path in glob_in(debugger_dir, INDEX_GLOB)]
        if not self._ranks:
            raise _without_index(debugger_dir)
        world_sizes = {rank.world_size for rank in self._ranks}
        if len(world_sizes) > 1:
            raise CorruptPageError(f"the indexes in {debugger_dir} disagree on the number of ranks "
                                   f"({sorted(world_sizes)}): they come from different runs; rerun the epoch")
        self.complete = bool(self._ranks) and len(self._ranks) == world_sizes.pop() \
            and all(rank.index["complete"] for rank in self._ranks)

    @property
    def errors(self) -> list[DebugDataError]:
        """Unreadable unindexed pages, found while an incomplete epoch's locations are gathered."""
        for rank in self._ranks:
            if not rank.searchable:
                rank.rows()
        return [error for rank in self._ranks for error in rank.errors]

    @property
    def locations(self) -> dict[int, str]:
        """``idx -> page file name`` of every captured datapoint (reads every locations file)."""
        return {int(row["idx"]): page_file_name(rank.rank, rank.world_size, int(row["page"]))
                for rank in self._ranks for row in rank.rows()}

    def _find(self, idx: int) -> tuple[RankIndex, np.void] | None:
        for rank in self._ranks:
            row = rank.find(idx)
            if row is not None:
                return rank, row
        return None

    def __getitem__(self, idx: int) -> dict[str, Any]:
        found = self._find(_as_idx(idx))
        if found is None:
            raise KeyError(idx)
        rank, row = found
        path = rank.page_path(int(row["page"]))
        fd = _open_listed_page(path)
        try:
            return read_record(fd, os.fstat(fd).st_size, row, path)
        finally:
            os.close(fd)

    def page_by_page(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(idx, outputs)`` of every datapoint, each page opened once and its records read in turn: a reader of
        a whole epoch (``analysis.internals``). What a page's records hold is counted against its size
        (``ReadBudget``): crafted location rows pointing at one record again and again cannot make the walk cost
        more than the page's bytes. An idx listed twice is read where ``self[idx]`` finds it."""
        seen = np.empty(0, np.int64)
        for rank in self._ranks:
            rows = rank.rows()  # sorted by idx: the first row of an idx is the one ``find`` returns
            rows = rows[np.unique(rows["idx"], return_index=True)[1]]
            rows = np.sort(rows[~np.isin(rows["idx"], seen)], order=["page", "idx"])
            seen = np.concatenate([seen, rows["idx"]])
            firsts = np.unique(rows["page"], return_index=True)[1]
            for page_rows in np.split(rows, firsts[1:]) if len(rows) else []:
                path = rank.page_path(int(page_rows["page"][0]))
                fd = _open_listed_page(path)
                try:
                    size = os.fstat(fd).st_size
                    budget = ReadBudget(path, size)
                    for row in page_rows:
                        yield int(row["idx"]), read_record(fd, size, row, path, budget)
                finally:
                    os.close(fd)

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(int(i) for rank in self._ranks for i in rank.rows()["idx"]))

    def __len__(self) -> int:
        return sum(rank.index["datapoints"] if rank.searchable else len(rank.rows()) for rank in self._ranks)

    def __contains__(self, idx: object) -> bool:
        return isinstance(idx, int) and not isinstance(idx, bool) and self._find(idx) is not None


def _without_index(folder: str) -> DebugDataError:
    """What a page folder without any index holds, and what to do."""
    kinds = set()
    for path in glob_in(folder, PAGE_GLOB):
        kinds.add(page_kind(path))
        if "pickle" in kinds:
            return pickle_pages_error(folder)
    holds = "Lantern pages but" if "lantern" in kinds else "no page and"
    return CorruptPageError(f"{folder} holds {holds} no index.json: the run stopped before writing one (see its log), "
                            "or the index was deleted; rerun the epoch to write its pages again")


def _open_listed_page(path: str) -> int:
    """A read-only fd of a page that an index or locations file lists."""
    try:
        return open_regular(path, "debug page", CorruptPageError)
    except FileNotFoundError:
        raise CorruptPageError(f"debug page {path} is listed in the index but missing; "
                               "rerun the epoch to regenerate its pages") from None


def _as_idx(idx: Any) -> int:
    if isinstance(idx, (int, np.integer)) and not isinstance(idx, bool):
        return int(idx)
    raise KeyError(idx)


def load_debug_outputs(epoch_dir: str) -> Optional[DebugOutputs]:
    """Debug outputs of a trainer's ``epoch_N`` folder or an evaluator's work dir; None where it has no
    ``debugger/`` folder, as the seed's ``load_debug_outputs`` returns.

    Why there are none is logged (``lantern.debugger``): a warning where the path is not such a folder (a missing
    path, the ``debugger/`` folder itself, a trainer's work dir, a conversion cut short), an info line for an epoch
    whose full outputs were not written or were removed.
    """
    debugger_dir = os.path.join(epoch_dir, DEBUGGER_DIR)
    if os.path.isdir(debugger_dir):
        return DebugOutputs(debugger_dir)
    why, mistaken = _what_it_is(epoch_dir)
    (logger.warning if mistaken else logger.info)(f"{epoch_dir} holds no debug outputs: {why}")
    return None


def _what_it_is(path: str) -> tuple[str, bool]:
    """What ``path`` is, said for a reader who expected debug outputs there, and whether it looks like a mistake
    (not an epoch folder at all)."""
    expected = (f"expected a trainer epoch folder (work_dir/{epoch_dir_name('N')}) or an evaluator work dir, with a "
                f"'{DEBUGGER_DIR}/' folder inside")
    if not os.path.exists(path):
        return f"no such folder; {expected}", True
    if not os.path.isdir(path):
        return f"it is a file; {expected}", True
    if glob_in(path, INDEX_GLOB):
        return f"it is a '{DEBUGGER_DIR}/' folder itself; pass its parent folder {os.path.dirname(path) or '.'}", True
    epochs = [epoch_dir_name(epoch) for epoch in RunDir(path).epochs_holding(DEBUGGER_DIR)]
    if epochs:
        return f"it is a trainer work dir; pass one of its epoch folders with debug outputs: {', '.join(epochs)}", True
    if os.path.isdir(os.path.join(path, DEBUGGER_DIR + CONVERTING)):
        return (f"a conversion of its '{DEBUGGER_DIR}/' folder was cut short; finish it with: python -m "
                f"debuggers.pages.convert {os.path.join(path, DEBUGGER_DIR)}"), True
    removed = removal_reason(path)
    if removed:
        return (f"its debug outputs were {removed} (config['debug_disk_budget_gb']); its scores and summaries "
                "are kept. Open an epoch that still has them, or raise the budget for the next run"), False
    return (f"no full debug outputs were written there (no '{DEBUGGER_DIR}/' folder): a trainer writes them at "
            "checkpoint epochs only (at the others, summaries_every_epoch keeps only the summaries, in "
            f"{EPOCH_TABLE_FILE}), and only with a 'debugger' in the config; {expected}"), False
