"""What the prompted datasets share: datapoints drawn on demand from their own random streams, and causes of
failure planted on a share of them, with the ground truth of which datapoint carries which."""

from __future__ import annotations

import numpy as np
from torch.utils.data import Dataset

from data.datasets.planted import PlantedCause
from data.datasets.synthetic_shapes import SPLIT_CODES

Described = tuple[tuple[str, ...], str, str]  # a cause's meta columns, the kind of finding expected, its description


class PlantedScenes(Dataset):
    """``num_datapoints`` datapoints, datapoint ``idx`` drawn from ``numpy.random.default_rng([seed, split, idx])``
    (``stream``); each planted cause (``PLANTED``: name -> ``Described``) carried by a share of them, decided by a
    stream of its own so that datapoints without any are unchanged by the shares."""

    PLANTED: dict[str, Described] = {}

    def __init__(self, num_datapoints: int, resolution: int, seed: int, split: str,
                 shares: dict[str, float]) -> None:
        if num_datapoints < 1:
            raise ValueError(f"num_datapoints must be at least 1, got {num_datapoints}")
        if resolution < 16:
            raise ValueError(f"resolution must be at least 16 pixels for the shapes to be legible, got {resolution}")
        if split not in SPLIT_CODES:
            raise ValueError(f"unknown split {split!r}; use one of {sorted(SPLIT_CODES)}")
        for name, share in shares.items():
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{name} is a share of datapoints between 0 and 1, got {share}")
        self.num_datapoints, self.resolution, self.seed, self.split = num_datapoints, resolution, seed, split
        self.shares = shares

    def __len__(self) -> int:
        return self.num_datapoints

    def stream(self, idx: int) -> tuple[int, np.random.Generator]:
        """Datapoint ``idx`` as an index in [0, len) (negative ones count from the end) and its random stream."""
        if not -self.num_datapoints <= idx < self.num_datapoints:
            raise IndexError(f"index {idx} is out of range for a dataset of {self.num_datapoints} datapoints; "
                             f"use 0 <= idx < {self.num_datapoints}")
        idx = int(idx) % self.num_datapoints
        return idx, np.random.default_rng([self.seed, SPLIT_CODES[self.split], idx])

    def carries(self, idx: int) -> list[bool]:
        """Whether datapoint ``idx`` carries each planted cause, in ``PLANTED``'s order."""
        draws = np.random.default_rng([self.seed, SPLIT_CODES[self.split], idx, 1]).random(len(self.PLANTED))
        return [bool(draw < self.shares[name]) for draw, name in zip(draws, self.PLANTED)]

    def planted_causes(self) -> list[PlantedCause]:
        """Ground truth for the failure analysis's benchmarks: each planted cause with its datapoints."""
        carried = [self.carries(i) for i in range(len(self))]
        return [PlantedCause(name, frozenset(i for i, flags in enumerate(carried) if flags[k]), *described)
                for k, (name, described) in enumerate(self.PLANTED.items()) if self.shares[name] > 0]
