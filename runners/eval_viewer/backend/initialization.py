"""Find one datapoint's debug outputs without opening every page of an epoch.

``load_debug_outputs(epoch_dir)`` reads only the small index files of
``epoch_dir/debugger/`` and returns a lazy mapping ``idx -> {debugger_name: output}``;
looking up an idx opens the one page that holds it, through the safe loader.
The same call works on a trainer's ``epoch_N`` folder and an evaluator's work dir.
"""

from __future__ import annotations

import glob
import os
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any, Optional

from debuggers.page_format import INDEX_GLOB, PAGE_GLOB, CorruptPageError, load_page, read_index

DEBUGGER_DIR = "debugger"


class DebugOutputs(Mapping):
    """Lazy ``idx -> outputs`` of one epoch, keeping the last ``cache_pages`` pages in memory.

    ``complete`` is False while the epoch is still being written (or was cut
    short); pages that no index lists yet (written just before a crash) are
    found by opening them once.
    """

    def __init__(self, debugger_dir: str, cache_pages: int = 2) -> None:
        self.debugger_dir = debugger_dir
        self.cache_pages = cache_pages
        self._cache: OrderedDict[str, dict] = OrderedDict()
        self._page_of: dict[str, str] = {}  # str(idx) -> page, as in the index: no per-idx work at start-up
        indexes = [read_index(path) for path in sorted(glob.glob(os.path.join(debugger_dir, INDEX_GLOB)))]
        for index in indexes:
            self._page_of.update(index["datapoints"])
        self.complete = bool(indexes) and all(index["complete"] for index in indexes)
        self._recover_unindexed_pages()

    def _recover_unindexed_pages(self) -> None:
        indexed = set(self._page_of.values())
        for path in sorted(glob.glob(os.path.join(self.debugger_dir, PAGE_GLOB))):
            name = os.path.basename(path)
            if name not in indexed:
                self._page_of.update(dict.fromkeys(map(str, self._page(name)), name))

    @property
    def locations(self) -> dict[int, str]:
        """``idx -> page file name`` of every captured datapoint."""
        return {int(i): page for i, page in self._page_of.items()}

    def _page(self, name: str) -> dict:
        if name in self._cache:
            self._cache.move_to_end(name)
            return self._cache[name]
        path = os.path.join(self.debugger_dir, name)
        if not os.path.exists(path):
            raise CorruptPageError(f"debug page {path} is listed in the index but missing; "
                                   "rerun the epoch to regenerate its pages")
        page = load_page(path)
        self._cache[name] = page
        while len(self._cache) > self.cache_pages:
            self._cache.popitem(last=False)
        return page

    def __getitem__(self, idx: int) -> dict[str, Any]:
        name = self._page_of[str(int(idx))]
        page = self._page(name)
        if int(idx) not in page:
            raise CorruptPageError(f"debug page {name} in {self.debugger_dir} does not hold datapoint {idx} "
                                   "although the index says so; rerun the epoch to regenerate its pages")
        return page[int(idx)]

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(map(int, self._page_of)))

    def __len__(self) -> int:
        return len(self._page_of)

    def __contains__(self, idx: object) -> bool:
        return isinstance(idx, int) and str(idx) in self._page_of


def load_debug_outputs(epoch_dir: str) -> Optional[DebugOutputs]:
    """Debug outputs of a trainer epoch dir or an evaluator work dir; None if it has none."""
    debugger_dir = os.path.join(epoch_dir, DEBUGGER_DIR)
    if not os.path.isdir(debugger_dir):
        return None
    return DebugOutputs(debugger_dir)
