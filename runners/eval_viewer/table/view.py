"""The datapoint table as the page shows it: its columns per epoch, its caption, tools and chips, and the previous /
next buttons.

The table is an AG Grid on the infinite row model: the browser asks for the rows it shows (sorted and filtered on the
server, ``table/data.py``), so an epoch of any size costs the same.
"""

from __future__ import annotations

from typing import Any, Optional

import dash_ag_grid as dag
from dash import dcc, html

from runners.eval_viewer.controls.view import debug_hint, epoch_badges
from runners.eval_viewer.pictures.thumbnails import has_pictures
from runners.eval_viewer.pictures.view import thumbnail_column
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import Paging
from runners.eval_viewer.shared.first_view import EpochView, FirstView
from runners.eval_viewer.shared.row_grids import ONE_REQUEST_AT_A_TIME
from runners.eval_viewer.shared.runs import Epoch
from runners.eval_viewer.shared.scores import ScoresError, default_metric
from runners.eval_viewer.shared.table import HIDDEN_COLUMNS, TABLE_ERRORS
from runners.eval_viewer.table.filter_text import EXAMPLES, LABEL_COLUMNS
from runners.eval_viewer.table.ids import (
    COLUMNS_PINNED,
    COLUMNS_SHOWN,
    FILTER_CHIPS,
    NAVIGATION_NOTE,
    NEXT_BUTTON,
    PREV_BUTTON,
    TABLE,
    TABLE_CAPTION,
    TABLE_CLEAR_FILTERS,
    TABLE_IDX_FILTER,
    TABLE_QUERY,
    TABLE_ROWS,
    WRONG_ONLY,
)
from runners.eval_viewer.tags.data import TAGS_COLUMN

TABLE_BLOCK_SIZE = 100  # rows per request; the grid asks for the next block while scrolling
OPEN_ROW_CLASS = "open-datapoint"  # the row of the open datapoint (viewer.css)
WRONG = "wrong"  # the "wrong only" tick box's value


def table_block(page: FirstView) -> list:
    """The table of the epoch the page opens on (``page``): its caption and tools (wrong only, the column chooser,
    Clear filters), the chips of its filters, the grid, and the stores of its query and of a finding's narrowing."""
    first = page.view
    return [
        html.Div([html.P(id=TABLE_CAPTION, className="hint"),
                  html.Div([dcc.Checklist(id=WRONG_ONLY, options=[{"label": "wrong only", "value": WRONG}],
                                          value=[WRONG] if first.query.get("wrong") else [], inline=True),
                            column_chooser(first.columns, page.pinned, page.hidden),
                            html.Button("Clear filters", id=TABLE_CLEAR_FILTERS, className="small-button")],
                           className="table-tools")],
                 className="caption-row"),
        html.Div(id=FILTER_CHIPS, className="filter-chips"),
        datapoint_table(pinned_and_hidden(first.columns, page.pinned, page.hidden), page.idx, page.filters),
        dcc.Store(id=TABLE_ROWS), dcc.Store(id=TABLE_QUERY, data=first.query),
        dcc.Store(id=TABLE_IDX_FILTER, **({"data": page.narrowing} if page.narrowing else {})),
    ]


def navigation(tools: list) -> html.Div:
    """Previous / next datapoint in the table's current order (keys k / j), ``tools`` that act on the table's rows
    (the export) beside them, and the note of a step past the table's end."""
    return html.Div([html.Button("◀ previous (k)", id=PREV_BUTTON, className="small-button", title="previous row (k)"),
                     html.Button("next (j) ▶", id=NEXT_BUTTON, className="small-button", title="next row (j)"),
                     *tools, html.Span(id=NAVIGATION_NOTE, className="hint")], className="navigation")


def filter_model(filters: Optional[dict[str, str]]) -> dict:
    """The table's filter model (AG Grid's) for the text typed in its boxes (column -> text)."""
    return {column: {"filterType": "text", "type": "contains", "filter": text} for column, text in
            (filters or {}).items()}


def datapoint_table(columns: list[dict], open_idx: Optional[int],
                    filters: Optional[dict[str, str]] = None) -> dag.AgGrid:
    """The table, its row of the open datapoint marked (``open_idx`` in the grid's context, which
    ``selection.py`` keeps up with the open datapoint however it was opened), its boxes holding
    ``filters`` (column -> typed text, from the address)."""
    model = filter_model(filters)
    return dag.AgGrid(
        id=TABLE, rowModelType="infinite", columnDefs=columns, getRowId="'' + params.data.idx",
        **({"filterModel": model} if model else {}),
        defaultColDef={"sortable": True, "filter": True, "floatingFilter": True, "resizable": True,
                       "minWidth": 90, "flex": 1, "filterParams": {"maxNumConditions": 1, "buttons": ["reset"]}},
        rowClassRules={OPEN_ROW_CLASS: "params.data && params.data.idx === params.context.open"},
        dashGridOptions={"cacheBlockSize": TABLE_BLOCK_SIZE, "maxBlocksInCache": 20, **ONE_REQUEST_AT_A_TIME,
                         "context": {"open": open_idx},
                         "suppressCellFocus": True, "rowHeight": 28, "headerHeight": 30,
                         # a debugger summary's column is named 'layer3_stats.mean': a field, not a nested path
                         "suppressFieldDotNotation": True},
        className="ag-theme-alpine", style={"height": "420px", "width": "100%"},
    )


def column_chooser(columns: list[dict], pinned: list[str], hidden: list[str]) -> html.Details:
    """Which columns the table shows, and which are pinned to its left (they stay while it scrolls sideways); the
    first page's ``columns`` come marked so (``pinned_and_hidden``)."""
    names = [column["field"] for column in columns if column.get("field")]
    return html.Details([
        html.Summary("Columns", className="small-button"),
        html.Div([dcc.Dropdown(id=COLUMNS_PINNED, options=names, value=pinned, multi=True,
                               placeholder="pin columns to the left"),
                  dcc.Checklist(id=COLUMNS_SHOWN, options=names, value=[n for n in names if n not in hidden],
                                className="column-list")],
                 className="column-chooser")], className="columns")


def pinned_and_hidden(columns: list[dict], pinned: list[str], hidden: list[str]) -> list[dict]:
    """``columns`` with those named pinned to the left and hidden."""
    return [{**column, **({"pinned": "left"} if column.get("field") in pinned else {}),
             **({"hide": True} if column.get("field") in hidden else {})} for column in columns]


LABEL_WIDTH = 110  # px: "triangle (2)"
NUMBER_WIDTH = 120  # px: the longest number the float columns' '.4~g' writes, "−0.0001234"


# A class id (an int, or a float in a column with NaN) shown by its name from the column's refData.
CLASS_NAME_FORMAT = "params.value == null ? 'n/a' : (params.colDef.refData['' + params.value] || '' + params.value)"


def epoch_view(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str], metric: Optional[str],
               idx_filter: Optional[list] = None, sort: Optional[str] = None, wrong: bool = False) -> EpochView:
    """The view of ``epoch_key`` of ``run_path``, keeping ``metric`` where the epoch has it (else its default: the
    run's failure metric, else the loss), the table sorted by ``sort`` (``column_defs``; the first page's, from the
    address bar). Used for the first page and on every switch, so both show the same."""
    run = backend.run(run_path)
    epochs = backend.epochs(run) if run else []
    epoch = next((e for e in epochs if e.key == epoch_key), None)
    if epoch is None:
        return EpochView([], None, [], _query(run_path, epoch_key, None, None, idx_filter, wrong), [])
    try:
        metrics = backend.metrics(epoch)
        chosen = metric if metric in metrics else default_metric(metrics, backend.table(epoch).roles)
    except TABLE_ERRORS:  # the score views say why; the metric stays for the next epoch
        metrics, chosen = [metric] if metric else [], metric
    try:
        version: Optional[str] = backend.version(epoch)
    except ScoresError:
        version = None  # removed while listed: the score views say so when they redraw
    hint = debug_hint(epochs, epoch)  # a button to the nearest epoch with debug outputs; its key is in the query,
    # so an epoch with debug outputs written since (a run still training) brings the button without a reload
    query = {**_query(run_path, epoch_key, chosen, version, idx_filter, wrong), "hint": [b.value for b in hint]}
    columns = column_defs(backend, epoch, chosen, sort)
    if columns and has_pictures(backend, run):  # after '#': each row's input image
        columns.insert(1, thumbnail_column(run.path, version))
    return EpochView(metrics, chosen, epoch_badges(backend, epoch) + hint, query, columns)


def _query(run_path: Optional[str], epoch_key: Optional[str], metric: Optional[str], version: Optional[str],
           idx_filter: Optional[list], wrong: bool) -> dict:
    return {"run": run_path, "epoch": epoch_key, "metric": metric, "version": version, "idx": idx_filter,
            "wrong": wrong}


def column_defs(backend: ViewerBackend, epoch: Epoch, metric: Optional[str], sort: Optional[str] = None) -> list[dict]:
    """One column per table column: idx, label and prediction (by class name), the metric (sorted worst
    first, unless ``sort`` names another order: ``table_sort``), the run's tags, the other scores, then meta info
    and debugger summaries. Every other column says it is unsorted: AG Grid keeps a column's sort when new
    definitions leave ``sort`` out, so after a metric switch the old metric (or a column the user sorted by) would
    still be sorted beside the new one."""
    try:
        table = backend.table(epoch)
    except TABLE_ERRORS:
        return []
    kinds = dict(table.columns())
    first = ["idx", *[c for c in LABEL_COLUMNS if c in kinds], *([metric] if metric in kinds else [])]
    order = first + [c for c in kinds if c not in first and c not in HIDDEN_COLUMNS]
    classes = backend.class_names(epoch)
    by, descending = table_sort(sort, order, metric, backend.higher_is_better(epoch, metric))
    columns = [{"headerName": "#", "colId": "row", "valueGetter": {"function": "params.node.rowIndex + 1"},
                "sortable": False, "filter": False, "maxWidth": 70, "minWidth": 60}]
    for name in order:
        column: dict[str, Any] = {"field": name, "headerName": name, **typed_filter(name)}
        column["sort"] = ("desc" if descending else "asc") if name == by else None
        if name == metric or name in LABEL_COLUMNS:  # read on every row: never cut to "cro…" or "square…"
            column["minWidth"] = max(_header_width(name), LABEL_WIDTH if name in LABEL_COLUMNS else NUMBER_WIDTH)
        if name in LABEL_COLUMNS and classes:  # a float column too (a NaN prediction): names, not "3"
            column["refData"] = {str(i): f"{c} ({i})" for i, c in classes.items()}
            column["valueFormatter"] = {"function": CLASS_NAME_FORMAT}
        elif kinds[name] == "float":
            column["valueFormatter"] = {"function": "params.value == null ? 'n/a' : d3.format('.4~g')(params.value)"}
        columns.append(column)
    columns.insert(1 + len(first), tags_column())
    columns.append({"field": "debug", "headerName": "debug", "sortable": False, "filter": False, "maxWidth": 90})
    return columns


def tags_column() -> dict:
    """Each row's tags (``tags/data.py``), after the metric: typed filters as in any column, never sorted (a row's
    tags are a set)."""
    return {"field": TAGS_COLUMN, "headerName": TAGS_COLUMN, **typed_filter(TAGS_COLUMN), "sortable": False,
            "minWidth": 90}


def table_sort(sort: Optional[str], columns: list[str], metric: Optional[str],
               higher_is_better: bool) -> tuple[Optional[str], bool]:
    """The column the table is sorted by and whether highest first: ``sort`` as the address bar records it
    (``-name`` highest first, ``name`` lowest first) where the table shows that column, else the metric, worst
    first."""
    name = (sort or "").removeprefix("-")
    if name in columns:
        return name, (sort or "").startswith("-")
    return metric, not higher_is_better


def _header_width(name: str) -> int:
    """Pixels a header needs for its whole name beside the sort arrow and menu (AG Grid's alpine theme)."""
    return 8 * len(name) + 56


def typed_filter(name: str) -> dict:
    """Every column's box takes typed filters (``filter_text``): a text filter whose text the server compiles."""
    return {"filter": "agTextColumnFilter", "headerTooltip": f"{name} · filter: {EXAMPLES}",
            "filterParams": {"filterOptions": ["contains", "blank", "notBlank"], "maxNumConditions": 1,
                             "filterPlaceholder": "> 2, a..b, x, y", "debounceMs": 300}}


def caption(label: str, count: int, total: int, query: dict, asked: Paging) -> str:
    """Names the epoch (so a reader, and a test, knows the table is current) and says when filters hide rows."""
    if not label:
        return ""
    order = f", sorted by {asked.sort} ({'highest' if asked.descending else 'lowest'} first)" if asked.sort else ""
    if count == total:
        return f"{label}: {total} datapoints{order}; click a row (or j/k) to open one."
    narrowed = (" (narrowed to a chosen set of datapoints)" if query.get("idx") is not None else "") + \
        (" (wrong only)" if query.get("wrong") else "")
    if count == 0:
        return f"{label}: no datapoint of {total} matches these filters{narrowed}; clear them to see all."
    return f"{label}: {count} of {total} datapoints match the filters{narrowed}{order}."
