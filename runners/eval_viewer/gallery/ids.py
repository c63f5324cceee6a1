"""Ids of the Gallery tab, and what the browser sends them."""

from runners.eval_viewer.shared.sends import Sends, anything, if_dict, record, text
from runners.eval_viewer.table.ids import ROWS

TAB_GALLERY = "tab-gallery"
GALLERY_OVERLAY = "gallery-overlay"  # which debug output is drawn over the images ('' for none)
GALLERY_SORT = "gallery-sort"  # the column the table (and so the gallery) is sorted by
GALLERY_ORDER = "gallery-order"  # 'desc' or 'asc'
GALLERY_PAGE = "gallery-page"  # dbc.Pagination
GALLERY_CAPTION = "gallery-caption"
GALLERY_TILES = "gallery-tiles"
GALLERY_SHOWN = "gallery-shown"  # the table's query, filters and sort, written only while the tab is shown
GALLERY_TILE = "gallery-tile"  # pattern-matching id type: {'type': GALLERY_TILE, 'idx': <idx>}

SENDS: Sends = {
    (GALLERY_SHOWN, "data"): record(query=if_dict(record(**ROWS)), filterModel=anything, sortModel=anything),
    (GALLERY_OVERLAY, "value"): text, (GALLERY_PAGE, "active_page"): anything,
}
