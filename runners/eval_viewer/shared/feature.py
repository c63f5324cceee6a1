"""A feature of the viewer (a tab, or a panel of the page) as ``app.py`` assembles it from its list ``FEATURES``.

Each feature's ``callbacks.py`` declares one: how its callbacks are wired to an app, what the browser may send them
(its ``ids.SENDS``, its part of ``PAGE_SENDS``) and, for a tab on the right, the tab. The page's fixed places
(controls, table, score views) are laid out by ``page.py``; the tabs come in the order of ``FEATURES``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from dash import Dash, dcc

from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.first_view import FirstView
from runners.eval_viewer.shared.sends import Sends


@dataclass(frozen=True)
class Tab:
    """A tab on the right: its value (the ``TABS`` value that shows it) and how the first page draws it."""

    value: str
    draw: Callable[[ViewerBackend, FirstView], dcc.Tab]


@dataclass(frozen=True)
class Feature:
    """A tab or panel: its callbacks (``register``), what the browser may send them, and its tab, if it is one."""

    register: Callable[[Dash, ViewerBackend], None]
    sends: Sends
    tab: Optional[Tab] = None
