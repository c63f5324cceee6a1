"""The Gallery tab: the table's datapoints as pictures, FiftyOne-style, a page of tiles at a time.

The tiles are the table's rows, under its filters and in its order (sorting here sorts the table too), each
the datapoint's input image with a chosen Debug Output drawn over it (Grad-CAM, patch attention, a captured
mask), its label and prediction (red when they differ) and the metric. A click opens the datapoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import dash_bootstrap_components as dbc
from dash import dcc, html

from runners.eval_viewer.datapoint.display_labels import class_text
from runners.eval_viewer.shared.ids import TAB_GALLERY

OVERLAY = "gallery-overlay"  # which debug output is drawn over the images ('' for none)
SORT = "gallery-sort"  # the column the table (and so the gallery) is sorted by
ORDER = "gallery-order"  # 'desc' or 'asc'
PAGE = "gallery-page"  # dbc.Pagination
CAPTION = "gallery-caption"
TILES = "gallery-tiles"
SHOWN = "gallery-shown"  # the table's query, filters and sort, written only while the tab is shown
TILE = "gallery-tile"  # pattern-matching id type: {'type': TILE, 'idx': <idx>}
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
    overlay: str = NO_OVERLAY
    sort_options: list[dict] = field(default_factory=list)
    sort: Optional[str] = None
    order: str = "desc"


def gallery_tab(view: GalleryView, shown: Optional[dict]) -> dcc.Tab:
    """The tab as ``view`` draws it; ``shown`` is the view of the table it was drawn for (the browser draws it
    again when the table's view changes while the tab is shown)."""
    controls = html.Div([
        html.Div([dbc.Label("Drawn over the images", html_for=OVERLAY, size="sm"),
                  dcc.Dropdown(id=OVERLAY, options=view.overlays, value=view.overlay, clearable=False)],
                 className="control", style={"width": "40%"}),
        html.Div([dbc.Label("Sorted by", html_for=SORT, size="sm"),
                  dcc.Dropdown(id=SORT, options=view.sort_options, value=view.sort, clearable=False)],
                 className="control", style={"width": "30%"}),
        dbc.RadioItems(id=ORDER, value=view.order, inline=True, class_name="gallery-order",
                       options=[{"label": "highest first", "value": "desc"},
                                {"label": "lowest first", "value": "asc"}]),
    ], className="controls gallery-controls")
    return dcc.Tab(label="Gallery", value=TAB_GALLERY, id=TAB_GALLERY, children=html.Div([
        controls,
        html.Div([html.Span(view.caption, id=CAPTION, className="hint"),
                  dbc.Pagination(id=PAGE, max_value=view.pages, active_page=view.page, fully_expanded=False, size="sm",
                                 previous_next=True, class_name="gallery-pages")], className="gallery-caption-row"),
        dcc.Store(id=SHOWN, **({} if shown is None else {"data": shown})),  # no data=None: it would fire
        html.Div(view.tiles, id=TILES, className="gallery-tiles"),
    ], className="tab-body"))


def tile(row: dict, address: str, metric: Optional[str], class_names: dict[int, str], is_open: bool) -> html.Div:
    """One datapoint: its picture, idx, label and prediction (red when they differ), the metric's value."""
    label, prediction = row.get("label"), row.get("prediction")
    wrong = label is not None and prediction is not None and label != prediction
    badges = [dbc.Badge(f"{role} {class_text(value, class_names)}", color="danger" if wrong else "success",
                        class_name=f"gallery-badge badge-{role}")
              for role, value in (("label", label), ("prediction", prediction)) if value is not None]
    value = row.get(metric) if metric else None
    score = f"{metric} {value:.4g}" if isinstance(value, float) else f"{metric} n/a" if metric else ""
    card = dbc.Card([
        html.Img(**{"data-src": address}, alt=f"datapoint {row['idx']}", className="gallery-picture"),
        dbc.CardBody([html.Div([html.Strong(f"idx {row['idx']}"), html.Span(score, className="gallery-score")],
                               className="gallery-tile-head"),
                      html.Div(badges, className="gallery-badges")], class_name="gallery-tile-body"),
    ])
    return html.Div(card, id={"type": TILE, "idx": int(row["idx"])}, n_clicks=0, title=f"datapoint {row['idx']}: "
                    "click to open it", className="gallery-tile" + (" open" if is_open else ""),
                    **{"data-idx": str(row["idx"])})
