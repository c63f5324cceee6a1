"""Columns that grow batch by batch as NumPy chunks: the form in which an epoch table is collected.

A collector keeps a few arrays per batch, never a dict per datapoint, so a million rows fit; the runner's
``analysis.epoch_rows.EpochRows`` and the debuggers' ``debuggers.summaries.DebuggerSummaries`` are both such
collectors.
"""

from __future__ import annotations

import numpy as np

Chunks = dict[str, list[tuple[np.ndarray, np.ndarray]]]


class ColumnChunks:
    """Named columns, each a list of ``(idx, values)`` chunks; a datapoint may lack a column."""

    def __init__(self) -> None:
        self.chunks: Chunks = {}

    def add(self, name: str, idx: np.ndarray, values: np.ndarray) -> None:
        self.chunks.setdefault(name, []).append((idx, values))

    def concatenated(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """One ``(idx, values)`` pair per column: the compact form sent from every rank to rank 0.

        Columns filled from the same batches share one idx array (collectors pass one array per batch).
        """
        joined: dict[tuple[int, ...], np.ndarray] = {}
        pairs = {}
        for name, parts in self.chunks.items():
            key = tuple(id(i) for i, _ in parts)
            if key not in joined:
                joined[key] = np.concatenate([i for i, _ in parts])
            pairs[name] = (joined[key], np.concatenate([v for _, v in parts]))
        return pairs
