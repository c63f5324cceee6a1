"""The Gallery tab's callbacks (``view.py`` draws it): a page of the table's rows as tiles, under its filters, in
its order.

The browser writes the table's query, filter model and sort model into ``GALLERY_SHOWN`` only while the tab is shown
(and only when they change), so a hidden gallery costs nothing; the tiles are the rows ``table_rows`` serves the
table, so both always agree. Sorting in the gallery sorts the table (in the browser), which asks for its rows again
and so redraws the gallery. A tile's picture is loaded by the browser once on screen (``assets/pictures.js``), never
by this callback."""

from __future__ import annotations

from typing import Optional

from dash import ALL, Dash, Input, Output, State, no_update

from runners.eval_viewer.datapoint.ids import TAB_DATAPOINT
from runners.eval_viewer.gallery.ids import (
    GALLERY_CAPTION,
    GALLERY_ORDER,
    GALLERY_OVERLAY,
    GALLERY_PAGE,
    GALLERY_SHOWN,
    GALLERY_SORT,
    GALLERY_TILE,
    GALLERY_TILES,
    SENDS,
    TAB_GALLERY,
)
from runners.eval_viewer.gallery.view import gallery_tab, gallery_view
from runners.eval_viewer.shared import opened
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.feature import Feature, Tab
from runners.eval_viewer.shared.ids import SELECTED, SELECTED_ROW, TABS
from runners.eval_viewer.table.ids import TABLE, TABLE_QUERY

_WHILE_SHOWN = """function(tab, request, query, previous) {
    // The table's query, filters and sort, while the Gallery tab is shown and when they change; a new view of
    // the rows starts on the gallery's first page.
    const none = window.dash_clientside.no_update;
    if (tab !== 'TAB' || !query) { return [none, none]; }
    const sortModel = ((request || {}).sortModel || []).map((s) => ({colId: s.colId, sort: s.sort}));
    const shown = {query: query, filterModel: (request || {}).filterModel || {}, sortModel: sortModel};
    return JSON.stringify(shown) === JSON.stringify(previous) ? [none, none] : [shown, 1];
}""".replace("TAB", TAB_GALLERY)

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
}""".replace("TABLE", TABLE)

_OPEN_TILE = """function(clicks) {
    // A tile clicked: its datapoint opens in the Datapoint tab.
    const none = window.dash_clientside.no_update;
    const clicked = (window.dash_clientside.callback_context.triggered || []).find((t) => t.value);
    if (!clicked) { return [none, none, none]; }
    return [JSON.parse(clicked.prop_id.slice(0, clicked.prop_id.lastIndexOf('.'))).idx, null, 'DATAPOINT'];
}""".replace("DATAPOINT", TAB_DATAPOINT)

_MARK_OPEN_TILE = """function(idx) {
    document.querySelectorAll('.gallery-tile').forEach(
        (tile) => tile.classList.toggle('open', tile.dataset.idx === String(idx)));
    return window.dash_clientside.no_update;
}"""


def register(app: Dash, backend: ViewerBackend) -> None:
    app.clientside_callback(_WHILE_SHOWN, Output(GALLERY_SHOWN, "data"), Output(GALLERY_PAGE, "active_page"),
                            Input(TABS, "value"), Input(TABLE, "getRowsRequest"),
                            State(TABLE_QUERY, "data"), State(GALLERY_SHOWN, "data"), prevent_initial_call=True)
    app.clientside_callback(_SORT_TABLE, Output(GALLERY_SORT, "id"), Input(GALLERY_SORT, "value"),
                            Input(GALLERY_ORDER, "value"), prevent_initial_call=True)
    app.clientside_callback(_OPEN_TILE, Output(SELECTED, "data", allow_duplicate=True),
                            Output(SELECTED_ROW, "data", allow_duplicate=True),
                            Output(TABS, "value", allow_duplicate=True),
                            Input({"type": GALLERY_TILE, "idx": ALL}, "n_clicks"), prevent_initial_call=True)
    opened.follow(app, _MARK_OPEN_TILE)

    @app.callback(Output(GALLERY_TILES, "children"), Output(GALLERY_CAPTION, "children"),
                  Output(GALLERY_PAGE, "max_value"), Output(GALLERY_PAGE, "active_page", allow_duplicate=True),
                  Output(GALLERY_OVERLAY, "options"),
                  Output(GALLERY_OVERLAY, "value"), Output(GALLERY_SORT, "options"), Output(GALLERY_SORT, "value"),
                  Output(GALLERY_ORDER, "value"),
                  Input(GALLERY_SHOWN, "data"), Input(GALLERY_OVERLAY, "value"), Input(GALLERY_PAGE, "active_page"),
                  State(SELECTED, "data"), prevent_initial_call=True)
    def show_gallery(shown: Optional[dict], overlay: Optional[str], page: Optional[int],
                     selected: Optional[int]) -> tuple:
        if not shown:
            return (no_update,) * 9
        view = gallery_view(backend, shown, overlay, page, selected)
        return (view.tiles, view.caption, view.pages, view.page, view.overlays, view.overlay, view.sort_options,
                view.sort, view.order)


FEATURE = Feature(register, SENDS, Tab(TAB_GALLERY, gallery_tab))
