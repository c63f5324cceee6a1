"""The pictures the page loads by address: table thumbnails and gallery tiles (``thumbnails.py``).

A Flask route rather than a Dash callback: the browser asks for an image only when its row or tile is on
screen (AG Grid draws only the visible rows; a tile gets its address once in view, ``assets/pictures.js``),
several at once, and keeps it
(the address holds the epoch's version). The rows request never waits for a picture.

    GET <prefix>lantern-picture?run=<run path>&idx=<n>[&epoch=<key>&overlay=<name>]&v=<version>

Everything in the address is looked up, never used as given: ``run`` must be a run the viewer found, ``epoch``
one of its epochs, ``idx`` plain digits, ``overlay`` one of the names the datapoint's outputs give. Anything
else is a 404 whose plain-text body says what was wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import flask
from dash import Dash

from runners.eval_viewer.pictures.ids import PICTURE_PATH, SENDS
from runners.eval_viewer.pictures.thumbnails import PictureUnavailable, Thumbnails
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.feature import Feature

_IDX = re.compile(r"[0-9]{1,18}")  # ASCII digits only: '²' is a digit to str.isdigit, not to int()
_CACHED = "private, max-age=86400"  # the address changes with the epoch's version


def register(app: Dash, backend: ViewerBackend) -> None:
    thumbnails = Thumbnails(backend)
    app.server.add_url_rule(f"{app.config.routes_pathname_prefix}{PICTURE_PATH}", PICTURE_PATH,
                            lambda: serve_picture(thumbnails, flask.request.args))


def serve_picture(thumbnails: Thumbnails, args: Mapping[str, str]) -> flask.Response:
    """The PNG the address asks for, or a 404 saying why there is none."""
    backend = thumbnails.backend
    run = backend.run(args.get("run"))
    if run is None:
        return _missing("no such run: pass the path of a run the viewer lists")
    idx_text = args.get("idx", "")
    if not _IDX.fullmatch(idx_text):
        return _missing("idx must be a datapoint index written in digits 0-9")
    idx, epoch_key, overlay = int(idx_text), args.get("epoch"), args.get("overlay")
    try:
        if epoch_key is None:
            picture = thumbnails.thumbnail(run, idx)
        else:
            epoch = backend.epoch(run, epoch_key)
            if epoch is None:
                return _missing(f"{run.name} has no epoch {epoch_key!r}")
            picture = thumbnails.tile(run, epoch, idx, overlay)
    except PictureUnavailable as exc:
        return _missing(str(exc))
    except Exception as exc:  # the run folder is data from anyone: an odd output costs its picture, nothing more
        return _missing(f"the picture of datapoint {idx} cannot be drawn ({type(exc).__name__}: {exc})")
    response = flask.Response(picture, mimetype="image/png")
    response.headers["Cache-Control"] = _CACHED
    return response


def _missing(reason: str) -> flask.Response:
    response = flask.Response(reason, status=404, mimetype="text/plain")
    response.headers["X-Content-Type-Options"] = "nosniff"  # never read as markup, whatever the reason quotes
    return response


FEATURE = Feature(register, SENDS)
