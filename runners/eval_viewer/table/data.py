"""The datapoint table: columns per epoch, rows served a block at a time, filters and sorts done on the server.

``TABLE_QUERY`` (run, epoch, metric, the idx ``TABLE_IDX_FILTER`` narrows this epoch to) says
what the rows are of; when it changes the browser drops its cached rows and asks
again. AG Grid's filter model is turned into ``(column, op, value)`` triples here,
so nothing typed in the page reaches a query as text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from dash import Dash, Input, Output, State, no_update

from runners.eval_viewer.failures.callbacks import narrowed_idx
from runners.eval_viewer.pictures.thumbnails import has_pictures
from runners.eval_viewer.pictures.view import PICTURE_VERSION, thumbnail_column, version_tag
from runners.eval_viewer.shared import ids
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import BadRequest, Paging, paging
from runners.eval_viewer.shared.components import HIDDEN_COLUMNS, debug_hint, epoch_badges, epoch_state
from runners.eval_viewer.shared.runs import Epoch
from runners.eval_viewer.shared.scores import ScoresError, default_metric
from runners.eval_viewer.shared.table import TABLE_ERRORS
from runners.eval_viewer.table.filter_text import EXAMPLES, LABEL_COLUMNS, compile_filter

DEBUG_MARK = "✓"
LABEL_WIDTH = 110  # px: "triangle (2)"
# A class id (an int, or a float in a column with NaN) shown by its name from the column's refData.
CLASS_NAME_FORMAT = "params.value == null ? 'n/a' : (params.colDef.refData['' + params.value] || '' + params.value)"
_NULL_OPS = {"blank": "is null", "notBlank": "is not null"}


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(ids.METRIC_SELECT, "options"), Output(ids.METRIC_SELECT, "value"),
                  Output(ids.EPOCH_BADGES, "children"), Output(ids.TABLE_QUERY, "data"),
                  Output(ids.TABLE, "columnDefs"), Output(ids.VIEW_BUILT_FROM, "data"),
                  Input(ids.EPOCH_SELECT, "value"), Input(ids.METRIC_SELECT, "value"),
                  Input(ids.REFRESH, "data"), Input(ids.TABLE_IDX_FILTER, "data"), Input(ids.WRONG_ONLY, "value"),
                  State(ids.RUN_SELECT, "value"), State(ids.TABLE_QUERY, "data"), prevent_initial_call=True)
    def choose_rows(epoch_key: Optional[str], metric: Optional[str], _: Optional[int], narrowed: Optional[dict],
                    wrong: Optional[list], run_path: Optional[str], previous: Optional[dict]) -> tuple:
        """Everything that follows the chosen epoch, in one step: the metric, the epoch's badges, and the table's
        query (with the epoch's version) and columns. A run switch reaches it once, through the epoch
        (``refresh_epochs`` always sends the new run's epoch); the query then says to clear the filters, which
        would silently empty the next epoch's table. A refresh that finds nothing new changes nothing shown. The disk
        state the view is built from goes to the page (``assets/refresh.js``: a change between a switch and the
        page's next question is a change)."""
        built_from = {"key": [run_path, epoch_key], "epoch": epoch_state(backend, run_path, epoch_key)}
        view = epoch_view(backend, run_path, epoch_key, metric, narrowed_idx(narrowed, run_path, epoch_key),
                          wrong=bool(wrong))
        previous = {key: value for key, value in (previous or {}).items() if key != "clear"}
        same_epoch = (previous.get("run"), previous.get("epoch")) == (run_path, epoch_key)
        if view.query == previous:
            return (*(no_update,) * 5, built_from)
        same_columns = same_epoch and all(previous.get(key) == view.query.get(key) for key in ("metric", "version"))
        return (view.metrics, view.metric, view.badges, {**view.query, "clear": not same_epoch},
                no_update if same_columns else view.columns, built_from)

    app.clientside_callback(
        """function(query) {
            // One place resets the table, in order: filters first (when the query says so), then the rows.
            // The grid's next request therefore carries the cleared filter and the new query.
            const api = window.dash_ag_grid && dash_ag_grid.getApi('TABLE');
            if (api) {
                if (query && query.clear) { api.setFilterModel(null); }
                api.purgeInfiniteCache();
            }
            return window.dash_clientside.no_update;
        }""".replace("TABLE", ids.TABLE),
        Output(ids.TABLE, "id"), Input(ids.TABLE_QUERY, "data"), prevent_initial_call=True)

    app.clientside_callback(  # Clear filters, in the browser: as a server call, a refresh tick that came before
        # its answer made Dash drop it (the newer call cannot tell that the button was clicked)
        """function(clicks) {
            const api = window.dash_ag_grid && dash_ag_grid.getApi('TABLE');
            if (api && clicks) { api.setFilterModel(null); window.dash_clientside.set_props('WRONG', {value: []}); }
            return window.dash_clientside.no_update;
        }""".replace("TABLE", ids.TABLE).replace("WRONG", ids.WRONG_ONLY),
        Output(ids.TABLE_CLEAR_FILTERS, "id"), Input(ids.TABLE_CLEAR_FILTERS, "n_clicks"), prevent_initial_call=True)

    @app.callback(Output(ids.TABLE, "getRowsResponse"), Output(ids.TABLE_CAPTION, "children"),
                  Input(ids.TABLE, "getRowsRequest"), State(ids.TABLE_QUERY, "data"), prevent_initial_call=True)
    def serve_rows(request: Optional[dict], query: Optional[dict]) -> tuple:
        if not request:
            return no_update, no_update
        try:
            asked = paging(request)
            rows, count, total, label = table_rows(backend, query or {}, asked)
        except (*TABLE_ERRORS, BadRequest) as exc:
            return {"rowData": [], "rowCount": 0}, str(exc)
        return {"rowData": rows, "rowCount": count}, caption(label, count, total, query or {}, asked)


@dataclass
class EpochView:
    """What the page shows for a chosen run and epoch besides the rows: the metrics to rank by and the chosen
    one, the epoch's badges, the table's query (with the epoch's version, which changes when its files are
    rewritten) and columns."""

    metrics: list[str]
    metric: Optional[str]
    badges: list
    query: dict
    columns: list[dict]


def epoch_view(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str], metric: Optional[str],
               idx_filter: Optional[list] = None, sort: Optional[str] = None, wrong: bool = False) -> EpochView:
    """The view of ``epoch_key`` of ``run_path``, keeping ``metric`` where the epoch has it (else its default:
    the loss), the table sorted by ``sort`` (``column_defs``; the first page's, from the address bar). Used for the
    first page and on every switch, so both show the same."""
    run = backend.run(run_path)
    epochs = backend.epochs(run) if run else []
    epoch = next((e for e in epochs if e.key == epoch_key), None)
    if epoch is None:
        return EpochView([], None, [], _query(run_path, epoch_key, None, None, idx_filter, wrong), [])
    try:
        metrics = backend.metrics(epoch)
        chosen = metric if metric in metrics else default_metric(metrics, backend.table(epoch).roles.get(
            "higher_is_better", {}))
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


def table_of(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str]) -> Any:
    """The epoch's table, or None when no run or epoch is chosen; ``ScoresError`` when it cannot be read."""
    run = backend.run(run_path)
    epoch = backend.epoch(run, epoch_key) if run else None
    return (epoch, backend.table(epoch)) if epoch else (None, None)


def column_defs(backend: ViewerBackend, epoch: Epoch, metric: Optional[str], sort: Optional[str] = None) -> list[dict]:
    """One column per table column: idx, label and prediction (by class name), the metric (sorted worst
    first, unless ``sort`` names another order: ``table_sort``), the other scores, then meta info and debugger
    summaries. Every other column says it is unsorted: AG Grid keeps a column's sort when new definitions leave
    ``sort`` out, so after a metric switch the old metric (or a column the user sorted by) would still be sorted
    beside the new one."""
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
            column["minWidth"] = max(_header_width(name), LABEL_WIDTH if name in LABEL_COLUMNS else 0)
        if name in LABEL_COLUMNS and classes:  # a float column too (a NaN prediction): names, not "3"
            column["refData"] = {str(i): f"{c} ({i})" for i, c in classes.items()}
            column["valueFormatter"] = {"function": CLASS_NAME_FORMAT}
        elif kinds[name] == "float":
            column["valueFormatter"] = {"function": "params.value == null ? 'n/a' : d3.format('.4~g')(params.value)"}
        columns.append(column)
    columns.append({"field": "debug", "headerName": "debug", "sortable": False, "filter": False, "maxWidth": 90})
    return columns


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


def table_rows(backend: ViewerBackend, query: dict, asked: Paging) -> tuple[list[dict], int, int, str]:
    """The rows ``asked`` for (under its filter and sort), the filtered and total counts, the epoch's label."""
    epoch, table = table_of(backend, query.get("run"), query.get("epoch"))
    if table is None:
        return [], 0, 0, ""
    where = table_where(backend, epoch, table, query, asked.filter_model)
    rows = table.page(where=where, order_by=asked.sort, descending=asked.descending, offset=asked.start,
                      limit=max(asked.end - asked.start, 0))
    debug, pictures = backend.debug_indices(epoch), version_tag(query.get("version"))
    for row in rows:
        row["debug"] = DEBUG_MARK if row["idx"] in debug else ""
        row[PICTURE_VERSION] = pictures  # its thumbnail is drawn only by columns of the same epoch version
    return rows, table.count(where), table.count(), epoch.label


def table_where(backend: ViewerBackend, epoch: Epoch, table: Any, query: dict, filter_model: dict) -> list[tuple]:
    """The table's rows as ``(column, op, value)`` triples: what its query narrows to and its typed filters; what the
    rows, the score grid, the gallery and the export all show."""
    return query_filter(query, table) + where_of(filter_model, dict(table.columns()), backend.class_names(epoch))


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


def query_filter(query: dict, table: Any) -> list[tuple]:
    """What the table's query narrows to besides the typed boxes: a finding's idx, the wrong datapoints."""
    where: list[tuple] = []
    if query.get("idx") is not None:
        where.append(("idx", "in", list(query["idx"])))
    if query.get("wrong") and {"label", "prediction"} <= set(dict(table.columns())):
        where.append(("label", "differs from", "prediction"))
    return where


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
