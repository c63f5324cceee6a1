"""Where the page loads pictures from (``pictures/callbacks.py`` serves them), and the table's thumbnail column.

A picture's address names the run, the datapoint and, for a gallery tile, the epoch and the overlay, with a tag
of the epoch's version: a rewritten epoch gets new addresses, so the browser never shows a picture it kept of
the old one.
"""

from __future__ import annotations

import hashlib
from typing import Optional
from urllib.parse import urlencode

import dash

from runners.eval_viewer.pictures.ids import PICTURE_PATH

THUMBNAIL_COLUMN = "picture"
THUMBNAIL_RENDERER = "LanternThumbnail"  # assets/pictures.js
# A row's field holding the version tag of the epoch it is of: the renderer draws a thumbnail only where it is the
# column's (a run switch gives the columns of the new run while the old run's rows are still shown).
PICTURE_VERSION = "picture_version"


def picture_address(run_path: str, epoch_key: str, idx: int, overlay: str, version: Optional[str]) -> str:
    """Where a gallery tile's picture is served; every value in the query string."""
    query = {"run": run_path, "epoch": epoch_key, "idx": str(idx), "v": version_tag(version)}
    if overlay:
        query["overlay"] = overlay
    return f"{dash.get_relative_path('/' + PICTURE_PATH)}?{urlencode(query)}"


def thumbnail_column(run_path: str, version: Optional[str]) -> dict:
    """The table's thumbnail column: each visible row's picture, asked for by ``assets/pictures.js``."""
    return {"headerName": "", "headerTooltip": "the input image", "colId": THUMBNAIL_COLUMN,
            "cellRenderer": THUMBNAIL_RENDERER,
            "cellRendererParams": {"path": PICTURE_PATH, "run": run_path, "version": version_tag(version)},
            "sortable": False, "filter": False, "resizable": False, "suppressHeaderMenuButton": True,
            "width": 40, "minWidth": 40, "maxWidth": 40, "cellClass": "thumbnail-cell"}


def version_tag(version: Optional[str]) -> str:
    """A short tag of the epoch's version for a picture's address: a rewritten epoch gets new addresses, so the
    browser does not show pictures it kept of the old one."""
    return hashlib.sha1((version or "").encode()).hexdigest()[:12]
