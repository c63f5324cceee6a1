"""Small pictures of datapoints: the table's thumbnails and the gallery's tiles, as PNG bytes, made on demand.

The page asks for each picture by address (``pictures/callbacks.py``) only when its row or tile is on screen,
so the table's rows never wait for a picture and a 1M-datapoint epoch costs what the visible rows cost. A
picture reads the datapoint's captured inputs (one record of the run's ``datapoints/`` pages) and, for a tile
with an overlay, its debug outputs at the epoch (one record); made pictures are kept, keyed by what they are
made of (the run's captured index, the epoch's files), so a run that is still writing gets new ones.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from debuggers.pages.file_format import CorruptPageError, UnsafePageError
from runners.eval_viewer.figures.overlays import find_overlay, overlay_choices, picture_png
from runners.eval_viewer.figures.values import first_image, prompt_points
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.cache import BoundedCache
from runners.eval_viewer.shared.datapoint import load_item
from runners.eval_viewer.shared.datasets import captured_folder
from runners.eval_viewer.shared.debug import index_signature
from runners.eval_viewer.shared.runs import Epoch, Run
from runners.eval_viewer.shared.scores import ScoresError
from utils.errors import LanternUserError

THUMBNAIL_PX = 48  # the table's rows are 28 px: sharp at twice that
TILE_PX = 192  # a gallery tile is drawn ~150 px wide
PICTURES_KEPT = 4096  # a few kB each
READ_ERRORS = (CorruptPageError, UnsafePageError, OSError, ScoresError)


class PictureUnavailable(LanternUserError):
    """The datapoint has no picture to show (no captured image, no such overlay); the message says why."""


class Thumbnails:
    """Thumbnails and tiles of the datapoints of the runs a ``ViewerBackend`` reads, kept once made."""

    def __init__(self, backend: ViewerBackend, kept: int = PICTURES_KEPT) -> None:
        self.backend = backend
        self._made: BoundedCache[bytes] = BoundedCache(kept)

    def thumbnail(self, run: Run, idx: int) -> bytes:
        """The datapoint's input image, at most ``THUMBNAIL_PX`` a side."""
        key = ("thumbnail", run.path, index_signature(captured_folder(run)), idx)
        return self._made.get(key, lambda: picture_png(self._image(run, idx)[0], None, THUMBNAIL_PX))

    def tile(self, run: Run, epoch: Epoch, idx: int, overlay: Optional[str]) -> bytes:
        """The datapoint's input image with the debug output ``overlay`` (``overlay_choices``) drawn over it and its
        prompt points ringed, at most ``TILE_PX`` a side; without ``overlay``, the image and its points."""
        if not overlay:
            return self._made.get(("tile", run.path, index_signature(captured_folder(run)), idx),
                                  lambda: self._plain(run, idx))
        key = ("tile", run.path, self.backend.datapoint_version(run, epoch), idx, overlay)
        return self._made.get(key, lambda: self._overlaid(run, epoch, idx, overlay))

    def _plain(self, run: Run, idx: int) -> bytes:
        image, points = self._image(run, idx)
        return picture_png(image, None, TILE_PX, points)

    def _overlaid(self, run: Run, epoch: Epoch, idx: int, name: str) -> bytes:
        """The tile with the overlay ``name``; a datapoint without it among overlays its epoch offers (its debugger
        recorded an error or did not run for it) keeps its plain picture, which the tile then shows."""
        try:
            debug = self.backend.debug(epoch)
            outputs = debug.get(idx) if debug is not None else None
        except READ_ERRORS as exc:
            raise PictureUnavailable(f"the debug outputs of datapoint {idx} at {epoch.label} cannot be read: "
                                     f"{exc}") from None
        if outputs is None:
            raise PictureUnavailable(f"datapoint {idx} has no debug outputs at {epoch.label}")
        overlay = find_overlay(outputs, name)
        if overlay is None and name in overlay_names(self.backend, epoch):
            return self._plain(run, idx)
        if overlay is None:
            raise PictureUnavailable(f"datapoint {idx} has no output {name!r} to draw over its image at "
                                     f"{epoch.label}; it has: {', '.join(overlay_choices(outputs)) or 'none'}")
        image, points = self._image(run, idx, required=False)
        return picture_png(image, overlay, TILE_PX, points)

    def _image(self, run: Run, idx: int, required: bool = True) -> tuple[Any, Optional[np.ndarray]]:
        """The datapoint's input image and its prompt points (``values.prompt_points``)."""
        item = load_item(self.backend, run, idx)
        image = first_image(item.get("inputs"))
        if image is None and required:
            raise PictureUnavailable(item.get("dataset_error") or f"datapoint {idx} of {run.name} has no "
                                                                   "image-shaped input")
        return image, prompt_points(item.get("inputs"))


def overlay_names(backend: ViewerBackend, epoch: Epoch, idx: Optional[int] = None) -> list[str]:
    """The overlays the epoch's debug outputs offer, read from the outputs of ``idx`` (else of the first
    datapoint with debug outputs); empty when the epoch has none or they cannot be read."""
    try:
        debug = backend.debug(epoch)
        found = idx if debug is not None and idx in debug.indices else \
            min(debug.indices) if debug is not None and debug.indices else None
        outputs = debug.get(found) if found is not None else None
    except READ_ERRORS:
        return []
    return overlay_choices(outputs or {})


def has_pictures(backend: ViewerBackend, run: Optional[Run]) -> bool:
    """Whether the run captured its datapoints with an image-shaped input (read from its first captured one), so
    its table gets a thumbnail column."""
    try:
        captured = backend.captured(run) if run is not None else None
        first = min(captured.indices) if captured is not None and captured.indices else None
    except READ_ERRORS:
        return False
    return first is not None and first_image(load_item(backend, run, first).get("inputs")) is not None
