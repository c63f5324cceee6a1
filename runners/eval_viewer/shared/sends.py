"""The kinds of value the page sends to a server callback, in which each feature declares what its callbacks may
be sent (its ``SENDS``, by component and property; ``app.PAGE_SENDS`` joins them) and ``browser_input`` checks
every request against them before a callback runs.

A kind says whether a value (never None: None is unset, always allowed) is as the page sends it. ``anything`` is for
a value whose callback checks it and says in place what is wrong with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Kind = Callable[[Any], bool]
Sends = Mapping[tuple[str, str], Kind]  # (component id, or a pattern's type; property) -> kind
MAX_IDX = 2**63 - 1  # a dataset index is an int64 in every table


def text(value: Any) -> bool:
    return isinstance(value, str)


def whole(value: Any) -> bool:
    """A count of clicks, a row or layer number, a time in ms: the numbers the page sends."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_IDX


def flag(value: Any) -> bool:
    return isinstance(value, bool)


def choice(value: Any) -> bool:
    """An option's value, or the varying part of a pattern's component id."""
    return text(value) or whole(value)


def anything(value: Any) -> bool:
    """Any value: its callback checks it and says in place what is wrong with it."""
    return True


def list_of(kind: Kind) -> Kind:
    return lambda value: isinstance(value, list) and all(kind(item) for item in value)


def record(**kinds: Kind) -> Kind:
    """A dict whose keys named here hold their kind, or None; no callback reads its other keys."""
    return lambda value: isinstance(value, dict) and all(value.get(key) is None or kind(value[key])
                                                         for key, kind in kinds.items())


def if_dict(kind: Kind) -> Kind:
    """``kind`` where the value is a dict; its callback ignores anything else."""
    return lambda value: not isinstance(value, dict) or kind(value)


TEXTS = list_of(text)
OPTIONS = list_of(record(label=text, value=choice))
# What the page sends by property alone, whatever the component.
PROPERTY_SENDS: dict[str, Kind] = {
    "n_clicks": whole, "n_intervals": whole, "getRowsRequest": anything,  # the grid's request: ``paging``
    "clickData": record(points=list_of(record())),
}
