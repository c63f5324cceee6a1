"""The Gallery tab: the table's datapoints as pictures, FiftyOne-style, a page of tiles at a time.

The tiles are the table's rows, under its filters and in its order (sorting here sorts the table too), each
the datapoint's input image with a chosen Debug Output drawn over it (Grad-CAM, patch attention, a captured
mask), its label and prediction (red when they differ) and the metric. A click opens the datapoint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Optional

import dash_bootstrap_components as dbc
from dash import dcc, html

from runners.eval_viewer.figures.overlays import ERRORS_NAME, default_overlay
from runners.eval_viewer.gallery.ids import (
    GALLERY_CAPTION,
    GALLERY_ORDER,
    GALLERY_OVERLAY,
    GALLERY_PAGE,
    GALLERY_SHOWN,
    GALLERY_SORT,
    GALLERY_TILE,
    GALLERY_TILES,
    TAB_GALLERY,
)
from runners.eval_viewer.pictures.thumbnails import overlay_names
from runners.eval_viewer.pictures.view import picture_address
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import BadRequest, Paging, paging
from runners.eval_viewer.shared.first_view import FirstView
from runners.eval_viewer.shared.table import HIDDEN_COLUMNS, TABLE_ERRORS, class_text
from runners.eval_viewer.table.data import table_of, table_rows
from runners.eval_viewer.table.view import filter_model

PAGE_SIZE = 48
NO_OVERLAY = ""
NOTHING = "Choose a run and an epoch: the gallery shows the table's datapoints as pictures."


@dataclass
class GalleryView:
    """What the tab shows of the table's rows: the tiles of one page, and what its controls offer and show."""

    tiles: list = field(default_factory=list)
    caption: str = NOTHING
    pages: int = 1
    page: int = 1
    overlays: list[dict] = field(default_factory=lambda: [{"label": "nothing", "value": NO_OVERLAY}])
    overlay: Optional[str] = None  # None: not chosen yet (the epoch's ``default_overlay`` is drawn)
    sort_options: list[dict] = field(default_factory=list)
    sort: Optional[str] = None
    order: str = "desc"


def gallery_tab(backend: ViewerBackend, first: FirstView) -> dcc.Tab:
    """The tab as the first page shows it (``first_gallery``), with the view of the table it was drawn for (the
    browser draws it again when the table's view changes while the tab is shown)."""
    view, shown = first_gallery(backend, first, filter_model(first.filters))
    controls = html.Div([
        html.Div([dbc.Label("Drawn over the images", html_for=GALLERY_OVERLAY, size="sm"),
                  dcc.Dropdown(id=GALLERY_OVERLAY, options=view.overlays, value=view.overlay, clearable=False)],
                 className="control", style={"width": "40%"}),
        html.Div([dbc.Label("Sorted by", html_for=GALLERY_SORT, size="sm"),
                  dcc.Dropdown(id=GALLERY_SORT, options=view.sort_options, value=view.sort, clearable=False)],
                 className="control", style={"width": "30%"}),
        dbc.RadioItems(id=GALLERY_ORDER, value=view.order, inline=True, class_name="gallery-order",
                       options=[{"label": "highest first", "value": "desc"},
                                {"label": "lowest first", "value": "asc"}]),
    ], className="controls gallery-controls")
    return dcc.Tab(label="Gallery", value=TAB_GALLERY, id=TAB_GALLERY, children=html.Div([
        controls,
        html.Div([html.Span(view.caption, id=GALLERY_CAPTION, className="hint"),
                  dbc.Pagination(id=GALLERY_PAGE, max_value=view.pages, active_page=view.page, fully_expanded=False,
                                 size="sm", previous_next=True, class_name="gallery-pages")],
                 className="gallery-caption-row"),
        dcc.Store(id=GALLERY_SHOWN, **({} if shown is None else {"data": shown})),  # no data=None: it would fire
        html.Div(view.tiles, id=GALLERY_TILES, className="gallery-tiles"),
    ], className="tab-body"))


def tile(row: dict, address: str, metric: Optional[str], class_names: dict[int, str], is_open: bool) -> html.Div:
    """One datapoint: its picture, idx, label and prediction (red when they differ), the metric's value."""
    label, prediction = row.get("label"), row.get("prediction")
    wrong = label is not None and prediction is not None and label != prediction
    badges = [dbc.Badge(f"{role} {class_text(value, class_names)}", color="danger" if wrong else "success",
                        class_name=f"gallery-badge badge-{role}")
              for role, value in (("label", label), ("prediction", prediction)) if value is not None]
    value = row.get(metric) if metric else None
    score = [metric, " ", html.B(f"{value:.4g}" if isinstance(value, float) else "n/a")] if metric else ""
    card = dbc.Card([
        html.Img(**{"data-src": address}, alt=f"datapoint {row['idx']}", className="gallery-picture"),
        dbc.CardBody([html.Div([html.Strong(f"idx {row['idx']}"), html.Span(score, className="gallery-score")],
                               className="gallery-tile-head"),
                      html.Div(badges, className="gallery-badges")], class_name="gallery-tile-body"),
    ])
    return html.Div(card, id={"type": GALLERY_TILE, "idx": int(row["idx"])}, n_clicks=0,
                    title=f"datapoint {row['idx']}: click to open it",
                    className="gallery-tile" + (" open" if is_open else ""),
                    **{"data-idx": str(row["idx"])})


MAX_PAGE = 2**31 // PAGE_SIZE  # past any epoch's rows: a page asked beyond it is this one (shown: the last)


def gallery_view(backend: ViewerBackend, shown: dict, overlay: Optional[str], page: Optional[int],
                 selected: Optional[int]) -> GalleryView:
    """Page ``page`` of the table's rows (``shown``: its query, filter model and sort model) as tiles, with
    ``overlay`` drawn over their pictures where the epoch's debug outputs offer it (None: the epoch's
    ``default_overlay``; ``NO_OVERLAY``: none)."""
    query = shown.get("query") if isinstance(shown.get("query"), dict) else {}
    try:
        asked = paging({"filterModel": shown.get("filterModel"), "sortModel": shown.get("sortModel")})
        epoch, table = table_of(backend, _text(query.get("run")), _text(query.get("epoch")))
    except (*TABLE_ERRORS, BadRequest) as exc:
        return GalleryView(caption=str(exc))
    if table is None:
        return GalleryView()
    offered = overlay_names(backend, epoch)
    overlay = overlay if overlay in offered or overlay == NO_OVERLAY else default_overlay(offered) or NO_OVERLAY
    page = min(max(1, page if isinstance(page, int) and not isinstance(page, bool) else 1), MAX_PAGE)
    try:
        rows, count, total, label = table_rows(backend, query, _page(asked, page))
        if not rows and count:  # past the last page (the rows changed meanwhile): the last page
            page = math.ceil(count / PAGE_SIZE)
            rows, count, total, label = table_rows(backend, query, _page(asked, page))
    except (*TABLE_ERRORS, BadRequest) as exc:
        return GalleryView(caption=f"the gallery cannot show these rows: {exc}")
    classes = backend.class_names(epoch)
    tiles = [tile(row, picture_address(query["run"], epoch.key, row["idx"], overlay, query.get("version")),
                  query.get("metric"), classes, row["idx"] == selected) for row in rows]
    return GalleryView(
        tiles, _caption(label, count, total, page, asked, overlay), max(1, math.ceil(count / PAGE_SIZE)),
        page, [{"label": "nothing", "value": NO_OVERLAY}, *({"label": n, "value": n} for n in offered)],
        overlay, sort_options(table), asked.sort, "desc" if asked.descending else "asc")


def _page(asked: Paging, page: int) -> Paging:
    """The rows of gallery page ``page`` (from 1) under the table's filters and sort."""
    return replace(asked, start=(page - 1) * PAGE_SIZE, end=page * PAGE_SIZE)


def _text(value: Any) -> Optional[str]:
    """A run path or epoch key as the browser sent it, when it is text (it is then looked up, never used as is)."""
    return value if isinstance(value, str) else None


def sort_options(table: Any) -> list[dict]:
    """The columns the table (and so the gallery) can be sorted by."""
    return [{"label": name, "value": name} for name, _ in table.columns() if name not in HIDDEN_COLUMNS]


def _caption(label: str, count: int, total: int, page: int, asked: Paging, overlay: str) -> str:
    if count == 0:
        return f"{label}: no datapoint of {total} matches the table's filters; clear them to see all."
    first, last = (page - 1) * PAGE_SIZE + 1, min(page * PAGE_SIZE, count)
    order = f", sorted by {asked.sort} ({'highest' if asked.descending else 'lowest'} first)" if asked.sort else ""
    legend = " (false positives red, false negatives amber)" if overlay.endswith(ERRORS_NAME) else ""
    drawn = f"; {overlay} drawn over each input{legend}" if overlay else ""
    matching = f"{count} of {total} datapoints match the table's filters" if count < total else f"{total} datapoints"
    return f"{label}: {matching}{order}; {first}–{last} shown{drawn}. Click one to open it."


def first_gallery(backend: ViewerBackend, first: FirstView, filter_model: dict) -> tuple[GalleryView, Optional[dict]]:
    """The gallery as the first page shows it, and the view of the table it is drawn for: drawn only when it is
    the tab the page opens on (the table's query, sort and ``filter_model``, the address's typed filters, which the
    browser then finds unchanged); else empty, with the table's sort in its controls, drawn when first shown."""
    sort = next(({"colId": column["field"], "sort": column["sort"]} for column in first.view.columns
                 if column.get("sort") and column.get("field")), None)
    if first.tab != TAB_GALLERY:
        return GalleryView(sort=sort and sort["colId"], order=sort["sort"] if sort else "desc"), None
    shown = {"query": first.view.query, "filterModel": filter_model, "sortModel": [sort] if sort else []}
    return gallery_view(backend, shown, None, 1, first.idx), shown
