"""A small thread-safe LRU cache: the viewer keeps datasets, scores and debug indexes per (run, epoch).

Dash runs callbacks in several threads and a user clicks through many epochs, so
the cache is bounded (memory stays flat). The lock guards only the bookkeeping:
a value is built outside it, so one slow or stuck build (a huge index, a page on
a hung disk) delays only the requests for that same key, never those for other
runs and epochs. Two requests for one key share a single build.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Generic, Optional, TypeVar

T = TypeVar("T")


class BoundedCache(Generic[T]):
    """Keeps the ``max_entries`` most recently used values."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, T] = OrderedDict()
        self._building: dict[Hashable, Future] = {}
        self._lock = threading.Lock()

    def peek(self, key: Hashable) -> Optional[T]:
        """The value kept for ``key``, None when none is (nothing is built)."""
        with self._lock:
            return self._entries.get(key)

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The cached value for ``key``, built with ``build()`` on a miss; a failed build is not kept."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
            pending = self._building.get(key)
            if pending is None:
                future: Future = Future()
                self._building[key] = future
        if pending is not None:
            return pending.result()
        try:
            value = build()
        except BaseException as exc:
            with self._lock:
                del self._building[key]
            future.set_exception(exc)
            raise
        with self._lock:
            del self._building[key]
            self._entries[key] = value
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        future.set_result(value)
        return value
