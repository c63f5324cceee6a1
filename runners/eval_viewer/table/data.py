"""The datapoint table: columns per epoch, rows served a block at a time, filters and sorts done on the server.

``TABLE_QUERY`` (run, epoch, metric, the idx ``TABLE_IDX_FILTER`` narrows this epoch to) says
what the rows are of; when it changes the browser drops its cached rows and asks
again. AG Grid's filter model is turned into ``(column, op, value)`` triples here,
so nothing typed in the page reaches a query as text.
"""

from __future__ import annotations

from typing import Any, Optional

from run_dir.tags_file import TagsFileError
from runners.eval_viewer.pictures.view import PICTURE_VERSION, version_tag
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import Paging
from runners.eval_viewer.shared.runs import Epoch
from runners.eval_viewer.table.filter_text import compile_filter
from runners.eval_viewer.tags.data import TAGS_COLUMN, run_tags, tag_conditions

DEBUG_MARK = "✓"
_NULL_OPS = {"blank": "is null", "notBlank": "is not null"}


def table_of(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str]) -> Any:
    """The epoch's table, or None when no run or epoch is chosen; ``ScoresError`` when it cannot be read."""
    run = backend.run(run_path)
    epoch = backend.epoch(run, epoch_key) if run else None
    return (epoch, backend.table(epoch)) if epoch else (None, None)


def table_rows(backend: ViewerBackend, query: dict, asked: Paging) -> tuple[list[dict], int, int, str]:
    """The rows ``asked`` for (under its filter and sort), the filtered and total counts, the epoch's label."""
    epoch, table = table_of(backend, query.get("run"), query.get("epoch"))
    if table is None:
        return [], 0, 0, ""
    where = table_where(backend, epoch, table, query, asked.filter_model)
    rows = table.page(where=where, order_by=asked.sort, descending=asked.descending, offset=asked.start,
                      limit=max(asked.end - asked.start, 0))
    debug, pictures = backend.debug_indices(epoch), version_tag(query.get("version"))
    tags = _tag_cells(query.get("run"), [row["idx"] for row in rows])
    for row, tagged in zip(rows, tags):
        row["debug"] = DEBUG_MARK if row["idx"] in debug else ""
        row[TAGS_COLUMN] = tagged
        row[PICTURE_VERSION] = pictures  # its thumbnail is drawn only by columns of the same epoch version
    return rows, table.count(where), table.count(), epoch.label


def table_where(backend: ViewerBackend, epoch: Epoch, table: Any, query: dict, filter_model: dict) -> list[tuple]:
    """The table's rows as ``(column, op, value)`` triples: what its query narrows to and its typed filters (the tags
    column's as conditions on idx, ``tags/data.py``); what the rows, the score grid, the gallery and the export all
    show."""
    typed = {column: condition for column, condition in filter_model.items() if column != TAGS_COLUMN}
    tagged = where_of({TAGS_COLUMN: filter_model[TAGS_COLUMN]}, {}, {}) if TAGS_COLUMN in filter_model else []
    return (query_filter(query, table) + where_of(typed, dict(table.columns()), backend.class_names(epoch))
            + tag_conditions(tagged, query.get("run")))


def where_of(filter_model: dict, kinds: dict[str, str], class_names: dict[int, str]) -> list[tuple]:
    """The table's filter boxes (AG Grid's filter model: the text typed under each column, ``filter_text``) as
    ``(column, op, value)`` triples; 'Blank' and 'Not blank' in a column's menu are ``is null`` / ``is not null``."""
    where: list[tuple] = []
    for column, condition in filter_model.items():
        if condition.get("type") in _NULL_OPS:
            where.append((column, _NULL_OPS[condition["type"]]))
        else:
            where += compile_filter(column, kinds.get(column, ""), condition.get("filter"), class_names)
    return where


def _tag_cells(run_path: Optional[str], idx: list[int]) -> list[str]:
    """Each row's tags; none when the run's tags file cannot be used (the tag bar says why)."""
    try:
        return run_tags(run_path).cells(idx)
    except TagsFileError:
        return [""] * len(idx)


def query_filter(query: dict, table: Any) -> list[tuple]:
    """What the table's query narrows to besides the typed boxes: a finding's idx, the wrong datapoints."""
    where: list[tuple] = []
    if query.get("idx") is not None:
        where.append(("idx", "in", list(query["idx"])))
    if query.get("wrong") and {"label", "prediction"} <= set(dict(table.columns())):
        where.append(("label", "differs from", "prediction"))
    return where


