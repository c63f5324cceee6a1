"""Ground truth of causes of failure planted in a synthetic dataset on purpose.

A benchmark of the failure analysis asks a dataset which datapoints carry which planted cause and which meta
columns describe it, and checks that the analysis names them. ``PlantedCause`` is that answer, one per cause;
a dataset with planted causes offers them as ``dataset.planted_causes()``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlantedCause:
    """One planted cause and the datapoints that carry it.

    ``meta_columns`` are the epoch table's meta columns that describe the cause (a finding naming one of them
    names the cause); empty when only the inputs show it (an analysis can then find it only as a group of
    datapoints). ``finding`` is the kind of finding expected: ``'slice'`` (a group of datapoints that fail more
    than the rest) or ``'group'`` (one without a meta column: an embedding cluster).
    """

    name: str
    idx: frozenset[int]
    meta_columns: tuple[str, ...]
    finding: str
    description: str
