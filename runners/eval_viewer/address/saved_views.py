"""Named views of a run: the viewer's address (run, epoch, datapoint, tab, sort, filters, narrowing, comparisons,
columns) saved under a name the user types, offered again for that run.

Where they live: a folder of the viewer's own (``run_dir.saved_views``; ``--views-dir`` to choose), one file per
run, never in a run folder. A name is a JSON key and nothing else, never part of a path. A file that cannot be read
is an error naming it, for its run only, and saving to that run then refuses rather than overwrite it. An address is
checked as it is stored (re-encoded), so the reader never meets one the writer let through.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Callable
from typing import Optional
from urllib.parse import parse_qsl, urlencode

from run_dir.saved_views import MAX_VIEWS, Views, ViewsNotSaved, change_views, default_views_dir, read_views, views_file
from utils.errors import LanternUserError

MAX_NAME = 80  # characters of a view's name
MAX_QUERY = 16_384  # characters of one view's address, as stored
ENCODED_GROWTH = 12  # at most, from a character to its URL encoding (4 UTF-8 bytes, each %XX): longer is refused unread
# What an address may hold (``address/callbacks.py`` writes it, ``page.py`` reads it); ``f.<column>`` are filters.
ADDRESS_KEYS = ("run", "epoch", "idx", "tab", "metric", "sort", "wrong", "narrow", "cmp_epochs", "cmp_run",
                "cmp_epoch", "pin", "hide", "follow", "runs", "map_space", "map_colour")
FILTER_PREFIX = "f."


class SavedViewsError(LanternUserError):
    """The saved views file cannot be read or written, or a view is not one the viewer can keep."""


def clean_address(query: str) -> str:
    """``query`` (an address's ``?...``) with only the keys the viewer writes, re-encoded; ``SavedViewsError`` when
    it is too long to be one, as re-encoded (``*`` becomes ``%2A``: what is stored is what is checked)."""
    too_long = SavedViewsError(f"a view's address holds at most {MAX_QUERY} characters (as stored, URL-encoded)")
    if not isinstance(query, str) or len(query) > MAX_QUERY * ENCODED_GROWTH:
        raise too_long
    pairs = parse_qsl(query.lstrip("?"), keep_blank_values=False)
    cleaned = urlencode([(key, value) for key, value in pairs if key in ADDRESS_KEYS or key.startswith(FILTER_PREFIX)])
    if len(cleaned) > MAX_QUERY:
        raise too_long
    return cleaned


def clean_name(name: object) -> str:
    """A view's name as typed, trimmed; ``SavedViewsError`` says what a name may be."""
    if not isinstance(name, str) or not name.strip():
        raise SavedViewsError("type a name for the view first")
    name = name.strip()
    if len(name) > MAX_NAME or any(unicodedata.category(c).startswith("C") for c in name):
        raise SavedViewsError(f"a view's name is at most {MAX_NAME} printable characters")
    return name


class SavedViews:
    """The runs' views in the folder ``path``, by run path and name. Safe to share between the server's threads and
    between viewers in other processes (``run_dir.saved_views`` locks the folder)."""

    def __init__(self, path: Optional[str] = None) -> None:
        self.path = os.path.abspath(path or default_views_dir())

    def of_run(self, run_path: Optional[str]) -> dict[str, str]:
        """``name -> address`` of the run's views (empty without any); ``SavedViewsError`` when its file is bad."""
        if not run_path:
            return {}
        return self._checked(run_path, lambda: read_views(self.path, run_path))

    def save(self, run_path: str, name: object, query: str) -> str:
        """Keep ``query`` as the run's view ``name`` (replacing one of that name); the cleaned name."""
        name, query = clean_name(name), clean_address(query)

        def add(views: Views) -> None:
            _check_addresses(views)
            if name not in views and len(views) >= MAX_VIEWS:
                raise SavedViewsError(f"{run_path} has {MAX_VIEWS} saved views already; delete some from its file "
                                      f"in {self.path}")
            views[name] = query

        self._checked(run_path, lambda: change_views(self.path, run_path, add))
        return name

    def _checked(self, run_path: str, act: Callable[[], Optional[Views]]) -> Views:
        """``act``'s views with every address checked; a file or lock problem as ``SavedViewsError``."""
        try:
            views = act() or {}
            _check_addresses(views)
        except SavedViewsError:
            raise
        except ViewsNotSaved as exc:
            raise SavedViewsError(str(exc)) from None
        except (OSError, ValueError) as exc:  # RunFileError included
            raise SavedViewsError(f"the saved views of this run cannot be used ({exc}); move "
                                  f"{views_file(self.path, run_path)} away to start its views afresh (other runs' "
                                  "views are kept apart)") from None
        return dict(views)


def _check_addresses(views: Views) -> None:
    """``ValueError`` unless every stored address is one the writer stores (cleaning it changes nothing)."""
    for name, query in views.items():
        try:
            if clean_address(query) != query:
                raise ValueError(f"view {name!r} holds an address the viewer does not write")
        except SavedViewsError as exc:
            raise ValueError(f"view {name!r}: {exc}") from None
