"""AG Grid's rows requests (paging, sort model, filter model) checked before anything is served from them.

A request comes from the browser, so it can be anything: a sort model that is a dict, a string ``startRow``, a
filter condition that is not an object. Each is refused with a message saying what is wrong (shown in place of
the rows), never a server error; column names and values are then checked by the table they are asked of.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from utils.errors import LanternUserError

MAX_ROWS_PER_REQUEST = 1000  # AG Grid asks for a block of 100; a larger ask is refused, not served


class BadRequest(LanternUserError):
    """A rows request that cannot be answered (malformed paging, sort or filters)."""


@dataclass(frozen=True)
class RowsRequest:
    """A checked rows request: rows ``start .. end``, sorted by ``sort`` (highest first when ``descending``)."""

    start: int
    end: int
    sort: Optional[str]
    descending: bool
    filter_model: dict


def rows_request(request: Any) -> RowsRequest:
    """The request checked; ``BadRequest`` says what is malformed."""
    if not isinstance(request, dict):
        raise BadRequest("a rows request must be an object with startRow, endRow, sortModel and filterModel")
    start, end = request.get("startRow", 0), request.get("endRow", 100)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (start, end)) or not 0 <= start <= end \
            or end - start > MAX_ROWS_PER_REQUEST:
        raise BadRequest(f"rows {start!r}..{end!r} cannot be served: ask for at most {MAX_ROWS_PER_REQUEST} rows "
                         "by non-negative whole numbers")
    sort_model, filter_model = request.get("sortModel") or [], request.get("filterModel") or {}
    sort = (sort_model or [{}])[0] if isinstance(sort_model, list) else None
    if not isinstance(sort, dict) or not isinstance(sort.get("colId", ""), str) or not isinstance(filter_model, dict) \
            or not all(isinstance(condition, dict) for condition in filter_model.values()):
        raise BadRequest("the table's sort or filters are malformed; clear them")
    return RowsRequest(start, end, sort.get("colId"), sort.get("sort") == "desc", filter_model)
