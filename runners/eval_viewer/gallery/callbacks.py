"""The Gallery tab (``layout/gallery.py``): a page of the table's rows as tiles, under its filters, in its order.

The browser writes the table's query, filter model and sort model into ``SHOWN`` only while the tab is shown
(and only when they change), so a hidden gallery costs nothing; the tiles are the rows ``table_rows`` serves the
table, so both always agree. Sorting in the gallery sorts the table (in the browser), which asks for its rows
again and so redraws the gallery. A tile's picture is loaded by the browser once on screen
(``assets/pictures.js``), never by this callback.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Optional

from dash import ALL, Dash, Input, Output, State, no_update

from runners.eval_viewer.gallery import view as gallery
from runners.eval_viewer.gallery.view import GalleryView
from runners.eval_viewer.pictures.thumbnails import overlay_names
from runners.eval_viewer.pictures.view import picture_address
from runners.eval_viewer.shared import ids
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import BadRequest, Paging, paging
from runners.eval_viewer.shared.first_view import FirstView
from runners.eval_viewer.shared.table import HIDDEN_COLUMNS, TABLE_ERRORS
from runners.eval_viewer.table.data import table_of, table_rows

MAX_PAGE = 2**31 // gallery.PAGE_SIZE  # past any epoch's rows: a page asked beyond it is this one (shown: the last)
_WHILE_SHOWN = """function(tab, request, query, previous) {
    // The table's query, filters and sort, while the Gallery tab is shown and when they change; a new view of
    // the rows starts on the gallery's first page.
    const none = window.dash_clientside.no_update;
    if (tab !== 'TAB' || !query) { return [none, none]; }
    const sortModel = ((request || {}).sortModel || []).map((s) => ({colId: s.colId, sort: s.sort}));
    const shown = {query: query, filterModel: (request || {}).filterModel || {}, sortModel: sortModel};
    return JSON.stringify(shown) === JSON.stringify(previous) ? [none, none] : [shown, 1];
}""".replace("TAB", ids.TAB_GALLERY)

_SORT_TABLE = """function(column, order) {
    // The gallery's sort is the table's: applied to the table, which then asks for its rows (and the gallery
    // follows). Nothing to do when the table is sorted so already (the gallery was showing the table's sort).
    let api = null;
    try { api = dash_ag_grid.getApi('TABLE'); } catch (error) { return window.dash_clientside.no_update; }
    const sorted = api.getColumnState().find((state) => state.sort);
    if (column && (!sorted || sorted.colId !== column || sorted.sort !== order)) {
        api.applyColumnState({state: [{colId: column, sort: order}], defaultState: {sort: null}});
    }
    return window.dash_clientside.no_update;
}""".replace("TABLE", ids.TABLE)

_OPEN_TILE = """function(clicks) {
    // A tile clicked: its datapoint opens in the Datapoint tab.
    const none = window.dash_clientside.no_update;
    const clicked = (window.dash_clientside.callback_context.triggered || []).find((t) => t.value);
    if (!clicked) { return [none, none, none]; }
    return [JSON.parse(clicked.prop_id.slice(0, clicked.prop_id.lastIndexOf('.'))).idx, null, 'DATAPOINT'];
}""".replace("DATAPOINT", ids.TAB_DATAPOINT)

_MARK_OPEN_TILE = """function(idx) {
    document.querySelectorAll('.gallery-tile').forEach(
        (tile) => tile.classList.toggle('open', tile.dataset.idx === String(idx)));
    return window.dash_clientside.no_update;
}"""


def register(app: Dash, backend: ViewerBackend) -> None:
    app.clientside_callback(_WHILE_SHOWN, Output(gallery.SHOWN, "data"), Output(gallery.PAGE, "active_page"),
                            Input(ids.TABS, "value"), Input(ids.TABLE, "getRowsRequest"),
                            State(ids.TABLE_QUERY, "data"), State(gallery.SHOWN, "data"), prevent_initial_call=True)
    app.clientside_callback(_SORT_TABLE, Output(gallery.SORT, "id"), Input(gallery.SORT, "value"),
                            Input(gallery.ORDER, "value"), prevent_initial_call=True)
    app.clientside_callback(_OPEN_TILE, Output(ids.SELECTED, "data", allow_duplicate=True),
                            Output(ids.SELECTED_ROW, "data", allow_duplicate=True),
                            Output(ids.TABS, "value", allow_duplicate=True),
                            Input({"type": gallery.TILE, "idx": ALL}, "n_clicks"), prevent_initial_call=True)
    app.clientside_callback(_MARK_OPEN_TILE, Output(gallery.TILES, "id"), Input(ids.SELECTED, "data"),
                            prevent_initial_call=True)

    @app.callback(Output(gallery.TILES, "children"), Output(gallery.CAPTION, "children"),
                  Output(gallery.PAGE, "max_value"), Output(gallery.PAGE, "active_page", allow_duplicate=True),
                  Output(gallery.OVERLAY, "options"),
                  Output(gallery.OVERLAY, "value"), Output(gallery.SORT, "options"), Output(gallery.SORT, "value"),
                  Output(gallery.ORDER, "value"),
                  Input(gallery.SHOWN, "data"), Input(gallery.OVERLAY, "value"), Input(gallery.PAGE, "active_page"),
                  State(ids.SELECTED, "data"), prevent_initial_call=True)
    def show_gallery(shown: Optional[dict], overlay: Optional[str], page: Optional[int],
                     selected: Optional[int]) -> tuple:
        if not shown:
            return (no_update,) * 9
        view = gallery_view(backend, shown, overlay, page, selected)
        return (view.tiles, view.caption, view.pages, view.page, view.overlays, view.overlay, view.sort_options,
                view.sort, view.order)


def gallery_view(backend: ViewerBackend, shown: dict, overlay: Optional[str], page: Optional[int],
                 selected: Optional[int]) -> GalleryView:
    """Page ``page`` of the table's rows (``shown``: its query, filter model and sort model) as tiles, with
    ``overlay`` drawn over their pictures where the epoch's debug outputs offer it."""
    query = shown.get("query") if isinstance(shown.get("query"), dict) else {}
    try:
        asked = paging({"filterModel": shown.get("filterModel"), "sortModel": shown.get("sortModel")})
        epoch, table = table_of(backend, _text(query.get("run")), _text(query.get("epoch")))
    except (*TABLE_ERRORS, BadRequest) as exc:
        return GalleryView(caption=str(exc))
    if table is None:
        return GalleryView()
    offered = overlay_names(backend, epoch)
    overlay = overlay if overlay in offered else gallery.NO_OVERLAY
    page = min(max(1, page if isinstance(page, int) and not isinstance(page, bool) else 1), MAX_PAGE)
    try:
        rows, count, total, label = table_rows(backend, query, _page(asked, page))
        if not rows and count:  # past the last page (the rows changed meanwhile): the last page
            page = math.ceil(count / gallery.PAGE_SIZE)
            rows, count, total, label = table_rows(backend, query, _page(asked, page))
    except (*TABLE_ERRORS, BadRequest) as exc:
        return GalleryView(caption=f"the gallery cannot show these rows: {exc}")
    classes = backend.class_names(epoch)
    tiles = [gallery.tile(row, picture_address(query["run"], epoch.key, row["idx"], overlay, query.get("version")),
                          query.get("metric"), classes, row["idx"] == selected) for row in rows]
    return GalleryView(
        tiles, _caption(label, count, total, page, asked, overlay), max(1, math.ceil(count / gallery.PAGE_SIZE)),
        page, [{"label": "nothing", "value": gallery.NO_OVERLAY}, *({"label": n, "value": n} for n in offered)],
        overlay, sort_options(table), asked.sort, "desc" if asked.descending else "asc")


def _page(asked: Paging, page: int) -> Paging:
    """The rows of gallery page ``page`` (from 1) under the table's filters and sort."""
    return replace(asked, start=(page - 1) * gallery.PAGE_SIZE, end=page * gallery.PAGE_SIZE)


def _text(value: Any) -> Optional[str]:
    """A run path or epoch key as the browser sent it, when it is text (it is then looked up, never used as is)."""
    return value if isinstance(value, str) else None


def sort_options(table: Any) -> list[dict]:
    """The columns the table (and so the gallery) can be sorted by."""
    return [{"label": name, "value": name} for name, _ in table.columns() if name not in HIDDEN_COLUMNS]


def _caption(label: str, count: int, total: int, page: int, asked: Paging, overlay: str) -> str:
    if count == 0:
        return f"{label}: no datapoint of {total} matches the table's filters; clear them to see all."
    first, last = (page - 1) * gallery.PAGE_SIZE + 1, min(page * gallery.PAGE_SIZE, count)
    order = f", sorted by {asked.sort} ({'highest' if asked.descending else 'lowest'} first)" if asked.sort else ""
    drawn = f"; {overlay} drawn over each input" if overlay else ""
    matching = f"{count} of {total} datapoints match the table's filters" if count < total else f"{total} datapoints"
    return f"{label}: {matching}{order}; {first}–{last} shown{drawn}. Click one to open it."


def first_gallery(backend: ViewerBackend, first: FirstView, filter_model: dict) -> tuple[GalleryView, Optional[dict]]:
    """The gallery as the first page shows it, and the view of the table it is drawn for: drawn only when it is
    the tab the page opens on (the table's query, sort and ``filter_model``, the address's typed filters, which the
    browser then finds unchanged); else empty, with the table's sort in its controls, drawn when first shown."""
    sort = next(({"colId": column["field"], "sort": column["sort"]} for column in first.view.columns
                 if column.get("sort") and column.get("field")), None)
    if first.tab != ids.TAB_GALLERY:
        return GalleryView(sort=sort and sort["colId"], order=sort["sort"] if sort else "desc"), None
    shown = {"query": first.view.query, "filterModel": filter_model, "sortModel": [sort] if sort else []}
    return gallery_view(backend, shown, None, 1, first.idx), shown
