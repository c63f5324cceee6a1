"""Ids of the datapoint table, its filters and the previous / next buttons, and what the browser sends them."""

from runners.eval_viewer.shared.sends import TEXTS, Sends, flag, list_of, record, text, whole

TABLE = "datapoint-table"
TABLE_ROWS = "table-rows"  # the server's answer to the table's request for rows (``row_grids.answer``)
TABLE_CAPTION = "table-caption"
TABLE_CLEAR_FILTERS = "table-clear-filters"
TABLE_QUERY = "table-query"  # run, epoch, metric and filter the table's rows are served for
WRONG_ONLY = "wrong-only"  # tick box: only the datapoints whose prediction differs from their label
FILTER_CHIPS = "filter-chips"  # the active filters above the table, each removable (table/filters.py)
FILTER_CHIP = "filter-chip"  # pattern-matching id type of a chip: {'type': FILTER_CHIP, 'index': 'col:<name>'}
COLUMNS_SHOWN = "columns-shown"  # the column chooser: the columns shown ...
COLUMNS_PINNED = "columns-pinned"  # ... and those pinned to the left
TABLE_IDX_FILTER = "table-idx-filter"  # {run, epoch, idx}: the idx a Failures finding narrows that epoch to, or None
PREV_BUTTON = "prev-datapoint"
NEXT_BUTTON = "next-datapoint"
NAVIGATION_NOTE = "navigation-note"  # says why prev/next did nothing (the table's first or last row)

ROWS = {"metric": text, "version": text, "idx": list_of(whole), "wrong": flag, "hint": TEXTS, "clear": flag}
SENDS: Sends = {
    (WRONG_ONLY, "value"): TEXTS, (TABLE_QUERY, "data"): record(run=text, epoch=text, **ROWS),
    (TABLE_IDX_FILTER, "data"): record(run=text, epoch=text, idx=list_of(whole), finding=text, what=text),
}
