"""A small thread-safe LRU cache: the viewer keeps datasets, scores and debug indexes per (run, epoch).

Dash runs callbacks in several threads and a user clicks through many epochs, so
the cache is bounded (memory stays flat) and building an entry holds the lock
(two clicks never build the same dataset twice).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class BoundedCache(Generic[T]):
    """Keeps the ``max_entries`` most recently used values."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.RLock()

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The cached value for ``key``, built with ``build()`` on a miss."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
            value = build()
            self._entries[key] = value
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
            return value
