"""The buffer every metric keeps: each datapoint's scores by its idx, filled batch by batch (docs/guide.md)."""

from __future__ import annotations

from collections.abc import Iterable

import torch


class BufferedScores:
    """``reset_buffer`` and ``add_to_buffer`` as the runner calls them: ``buffer`` is ``{idx: {score: value}}``."""

    buffer: dict[int, dict[str, float]]

    def reset_buffer(self) -> None:
        self.buffer = {}

    def add_to_buffer(self, idx: Iterable[int], scores: dict[str, torch.Tensor]) -> None:
        columns = {name: values.tolist() for name, values in scores.items()}
        for row, i in enumerate(idx):
            self.buffer[int(i)] = {name: values[row] for name, values in columns.items()}
