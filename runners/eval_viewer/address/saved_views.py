"""Named views of a run: the viewer's address (run, epoch, datapoint, tab, sort, filters, narrowing, comparisons,
columns) saved under a name the user types, offered again for that run.

Where they live: one JSON file of the viewer's own (``run_dir.saved_views``; ``--views-file`` to choose), keyed by
the run's absolute path, never in a run folder. A name is a JSON key and nothing else, never part of a path. A file
that cannot be read is an error naming it, and saving then refuses rather than overwrite it.
"""

from __future__ import annotations

import os
import threading
import unicodedata
from typing import Optional
from urllib.parse import parse_qsl, urlencode

from run_dir.saved_views import MAX_VIEWS, default_views_file, read_views_file, write_views_file
from utils.errors import LanternUserError

MAX_NAME = 80  # characters of a view's name
MAX_QUERY = 16_384  # characters of one view's address
# What an address may hold (``address/callbacks.py`` writes it, ``page.py`` reads it); ``f.<column>`` are filters.
ADDRESS_KEYS = ("run", "epoch", "idx", "tab", "metric", "sort", "wrong", "narrow", "cmp_epochs", "cmp_run",
                "cmp_epoch", "pin", "hide", "follow", "runs", "map_space", "map_colour")
FILTER_PREFIX = "f."


class SavedViewsError(LanternUserError):
    """The saved views file cannot be read or written, or a view is not one the viewer can keep."""


def clean_address(query: str) -> str:
    """``query`` (an address's ``?...``) with only the keys the viewer writes, re-encoded; ``SavedViewsError`` when
    it is too long to be one."""
    if not isinstance(query, str) or len(query) > MAX_QUERY:
        raise SavedViewsError(f"a view's address holds at most {MAX_QUERY} characters")
    pairs = parse_qsl(query.lstrip("?"), keep_blank_values=False)
    return urlencode([(key, value) for key, value in pairs if key in ADDRESS_KEYS or key.startswith(FILTER_PREFIX)])


def clean_name(name: object) -> str:
    """A view's name as typed, trimmed; ``SavedViewsError`` says what a name may be."""
    if not isinstance(name, str) or not name.strip():
        raise SavedViewsError("type a name for the view first")
    name = name.strip()
    if len(name) > MAX_NAME or any(unicodedata.category(c).startswith("C") for c in name):
        raise SavedViewsError(f"a view's name is at most {MAX_NAME} printable characters")
    return name


class SavedViews:
    """The views in ``path``, by run path and name. Safe to share between the server's threads."""

    def __init__(self, path: Optional[str] = None) -> None:
        self.path = os.path.abspath(path or default_views_file())
        self._lock = threading.Lock()

    def of_run(self, run_path: Optional[str]) -> dict[str, str]:
        """``name -> address`` of the run's views (empty without any); ``SavedViewsError`` when the file is bad."""
        if not run_path:
            return {}
        with self._lock:
            return dict(self._read().get(run_path, {}))

    def save(self, run_path: str, name: object, query: str) -> str:
        """Keep ``query`` as the run's view ``name`` (replacing one of that name); the cleaned name."""
        name, query = clean_name(name), clean_address(query)
        with self._lock:
            views = self._read()
            of_run = views.setdefault(run_path, {})
            if name not in of_run and len(of_run) >= MAX_VIEWS:
                raise SavedViewsError(f"{run_path} has {MAX_VIEWS} saved views already; delete some from {self.path}")
            of_run[name] = query
            write_views_file(self.path, views)
        return name

    def _read(self) -> dict[str, dict[str, str]]:
        try:
            views = read_views_file(self.path)
        except (OSError, ValueError) as exc:
            raise SavedViewsError(f"the saved views cannot be read ({exc}); move {self.path} away to start afresh") \
                from None
        return {run: {name: clean_address(query) for name, query in named.items()} for run, named in views.items()}
