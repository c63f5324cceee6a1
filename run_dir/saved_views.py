"""The file of the viewer's named views: ``{run's absolute path: {name: address}}``, read and written whole.

It is one JSON file of the viewer's own, ``~/.config/lantern/viewer_views.json`` (``$XDG_CONFIG_HOME`` when set),
never in a run folder: a run folder is data, often shared or read-only, and a viewer that writes there could be
made to write elsewhere by a crafted folder. It is read as guardedly as a run's files (a regular file, at most
``MAX_BYTES``, JSON of the expected shape; anything else is a ``RunFileError`` naming it), and written whole (a
temporary file, then renamed). What an address may hold is the viewer's (``runners.eval_viewer``).
"""

from __future__ import annotations

import os

from run_dir.errors import RunFileError
from run_dir.run_files import MIB, read_run_json
from utils.atomic_files import atomic_write_json

MAX_BYTES = 4 * MIB
MAX_VIEWS = 200  # per run
FORMAT = "lantern-viewer-views"
Views = dict[str, dict[str, str]]


def default_views_file() -> str:
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(config, "lantern", "viewer_views.json")


def read_views_file(path: str) -> Views:
    """The views in ``path`` ({} when there is no file); ``RunFileError`` (or ``OSError``) when it is not a file
    the viewer wrote."""
    if not os.path.lexists(path):
        return {}
    data = read_run_json(path, "saved views file", MAX_BYTES)
    views = data.get("views") if isinstance(data, dict) and data.get("format") == FORMAT else None
    if not isinstance(views, dict) or not all(
            isinstance(run, str) and isinstance(named, dict) and len(named) <= MAX_VIEWS
            and all(isinstance(k, str) and isinstance(v, str) for k, v in named.items())
            for run, named in views.items()):
        raise RunFileError(f"{path} is not a Lantern saved views file (expected {{'format': '{FORMAT}', "
                           "'views': {run: {name: address}}}); move it away to start afresh")
    return views


def write_views_file(path: str, views: Views) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write_json(path, {"format": FORMAT, "version": 1, "views": views})
