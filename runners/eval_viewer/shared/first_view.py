"""What the page opens on: the run, epoch, table view, datapoint and tab chosen before the page is built
(``page.first_view``), handed to every part of the layout so that the first load costs one round of requests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class EpochView:
    """What the page shows for a chosen run and epoch besides the rows: the metrics to rank by and the chosen
    one, the epoch's badges, the table's query (with the epoch's version, which changes when its files are
    rewritten) and columns (``table.view.epoch_view``)."""

    metrics: list[str]
    metric: Optional[str]
    badges: list
    query: dict
    columns: list[dict]


@dataclass
class FirstView:
    """What the page opens on."""

    run: Optional[str]
    epochs: list[dict]
    epoch: Optional[str]
    view: EpochView
    idx: Optional[int]
    tab: str
    problems: list[str] = field(default_factory=list)  # what in the address could not be used, and why
    filters: dict[str, str] = field(default_factory=dict)  # column -> text typed in its box
    narrowing: Optional[dict] = None  # a Failures finding's narrowing (failures.data.narrowing)
    compare: dict = field(default_factory=dict)  # the comparisons' choices: epochs, run, epoch (None: defaults)
    pinned: list[str] = field(default_factory=list)  # columns pinned to the table's left
    hidden: list[str] = field(default_factory=list)  # columns the column chooser hides
    follow: bool = False  # a new epoch of the run is opened as it comes
    address: Mapping[str, list[str]] = field(default_factory=dict)  # the page's address: a tab's own choices in it
