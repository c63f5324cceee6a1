"""What the browser sends, checked before it is used: a datapoint's idx, an idx typed in the address, the table's
paging requests, values the page stores again.

The page sends these as it was built to, but anything can POST to a callback or type an address: a value of the
wrong type must give a message in place (``BadRequest``), never an HTTP 500 (Python's ``str.isdigit`` is true for
``'²'``, which ``int`` refuses; a sort model may come as a dict; an idx as 10^30). Whole callback requests are
checked before any callback runs by ``request_check``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

from runners.eval_viewer.shared.sends import MAX_IDX

MAX_ROWS_PER_REQUEST = 1000  # the grid asks for 100 at a time
_MAX_STORED_DEPTH = 8  # the page's own stores nest 3 deep
_DIGITS = re.compile(r"[0-9]{1,19}")  # ASCII digits only


class BadRequest(ValueError):
    """Something the browser sent is not what the page sends; the message says what was wrong."""


def datapoint_idx(value: Any) -> Optional[int]:
    """An open datapoint's idx as the page stores it (an int, or None for none); ``BadRequest`` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_IDX:
        raise BadRequest(f"datapoint idx {shown_value(value)} is not a dataset index (a whole number 0..{MAX_IDX}); "
                         "open a datapoint from the table or the grid")
    return value


def typed_idx(text: str) -> Optional[int]:
    """``text`` (from the address, or typed) as a dataset index; None when it is not one: ASCII digits only."""
    text = text.strip()
    if not _DIGITS.fullmatch(text) or int(text) > MAX_IDX:
        return None
    return int(text)


@dataclass(frozen=True)
class Paging:
    """One of the grid's requests for rows: ``[start, end)`` under a filter model and a sort."""

    start: int
    end: int
    filter_model: dict = field(default_factory=dict)
    sort: Optional[str] = None
    descending: bool = False


def paging(request: Any) -> Paging:
    """The grid's ``getRowsRequest`` checked; ``BadRequest`` names the first field that is not as the grid sends."""
    if not isinstance(request, dict):
        raise BadRequest("the table's request for rows is not an object; reload the page")
    start, end = request.get("startRow", 0), request.get("endRow", 100)
    for name, value in (("startRow", start), ("endRow", end)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_IDX:
            raise BadRequest(f"the table's request for rows has {name} {shown_value(value)}, not a row number; "
                             "reload the page")
    filter_model = request.get("filterModel") or {}
    sort_model = request.get("sortModel") or []
    if not isinstance(filter_model, dict) or not all(isinstance(c, dict) for c in filter_model.values()):
        raise BadRequest("the table's filter model is not an object of column filters; clear the filters")
    if not isinstance(sort_model, list) or not all(isinstance(s, dict) and isinstance(s.get("colId"), str)
                                                   for s in sort_model):
        raise BadRequest("the table's sort model is not a list of sorted columns; click a column header to sort")
    first = sort_model[0] if sort_model else {}
    return Paging(start, min(end, start + MAX_ROWS_PER_REQUEST), filter_model, first.get("colId"),
                  first.get("sort") == "desc")


def storable(value: Any, depth: int = 0) -> Any:
    """``value`` (sent by the browser) as the page may store it again: an int beyond 64 bits anywhere in it becomes
    its quoted text, as does nesting deeper than a page writes, for Dash's JSON encoder (orjson, where installed)
    refuses such an int with an HTTP 500."""
    if isinstance(value, int) and not isinstance(value, bool) and not -2**63 <= value < 2**64:
        return shown_value(value)
    if isinstance(value, (list, dict)) and depth >= _MAX_STORED_DEPTH:
        return shown_value(value)
    if isinstance(value, list):
        return [storable(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {k: storable(v, depth + 1) for k, v in value.items()}
    return value


def shown_value(value: Any) -> str:
    """A value the browser sent, as a message quotes it: its ``repr``, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


