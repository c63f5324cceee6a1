"""The Datapoint tab: the open datapoint with its scores and the four sections.

A click must draw fast, so a drawn panel is kept (keyed by run, epoch, the epoch's
version, idx and the debuggers shown: nothing is rebuilt that did not change), only
the debuggers ticked above the panel are drawn, and while the browser draws one
datapoint a background thread draws its neighbours in the table (what ``j`` / ``k``
open next).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Optional

from dash import dcc, html

from runners.eval_viewer.controls.view import epoch_badges
from runners.eval_viewer.datapoint.display_datapoint import display_datapoint
from runners.eval_viewer.datapoint.display_labels import class_badges
from runners.eval_viewer.datapoint.ids import (
    DATAPOINT_DRAWN,
    DATAPOINT_PANEL,
    DATAPOINT_STATUS,
    DEBUGGER_PICK,
    TAB_DATAPOINT,
)
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import BadRequest, paging
from runners.eval_viewer.shared.cache import BoundedCache
from runners.eval_viewer.shared.components import (
    NOTHING_OPEN,
    datapoint_title,
    message,
    percentiles,
    score_badges,
    tab_of,
)
from runners.eval_viewer.shared.datapoint import load_datapoint
from runners.eval_viewer.shared.first_view import FirstView
from runners.eval_viewer.shared.pending import pending_status
from runners.eval_viewer.shared.runs import Epoch, Run
from runners.eval_viewer.shared.scores import ScoresError
from runners.eval_viewer.shared.table import TABLE_ERRORS
from runners.eval_viewer.table.data import table_rows

DEFAULT_SHOWN = 3  # debuggers drawn until the user ticks others: a click stays fast with many debuggers
PANELS_KEPT = 64  # drawn panels kept (a few hundred kB each)


@dataclass(frozen=True)
class Panel:
    """What the Datapoint tab shows, and every debugger the datapoint has outputs of (shown or not)."""

    body: html.Div
    debuggers: tuple[str, ...] = ()


def shown_debuggers(debuggers: list[str], chosen: Optional[list[str]]) -> list[str]:
    """The ticked debuggers the datapoint has; the first ``DEFAULT_SHOWN`` until the user ticks any (or when
    the ticked ones are another run's)."""
    ticked = [name for name in debuggers if name in (chosen or [])]
    if chosen is None or (chosen and not ticked):
        return debuggers[:DEFAULT_SHOWN]
    return ticked


def build_panel(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str], idx: Optional[int],
                chosen: Optional[list[str]] = None) -> Panel:
    """The open datapoint with the chosen debuggers' outputs; reads the captured item and the page holding
    ``idx`` only."""
    run = backend.run(run_path)
    return draw_panel(backend, run, backend.epoch(run, epoch_key) if run else None, idx, chosen)


def draw_panel(backend: ViewerBackend, run: Optional[Run], epoch: Optional[Epoch], idx: Optional[int],
               chosen: Optional[list[str]] = None) -> Panel:
    """``build_panel`` for a run and epoch already found."""
    if run is None or epoch is None:
        return Panel(html.Div(message("Pick a run and an epoch.")))
    if idx is None:
        return Panel(html.Div(message(NOTHING_OPEN)))
    datapoint = load_datapoint(backend, run, epoch, int(idx))
    if datapoint.get("missing"):
        return Panel(html.Div([datapoint_title(run, epoch, idx), message(datapoint["missing"], "secondary")]))
    debuggers = list(datapoint.get("debug") or {})
    if debuggers:
        shown = shown_debuggers(debuggers, chosen)
        datapoint["debug"] = {name: datapoint["debug"][name] for name in shown}
    badges = [*epoch_badges(backend, epoch), *class_badges(datapoint),
              *score_badges(datapoint["scores"], percentiles(backend, epoch, datapoint))]
    header = [datapoint_title(run, epoch, idx), html.Div(badges, className="badges")]
    if datapoint.get("scores_error"):
        header.append(message(datapoint["scores_error"], "warning"))
    body = [*header, display_datapoint(datapoint)]
    if debuggers and not datapoint["debug"]:
        body.append(message("No debugger is ticked above: tick one to see its outputs.", "secondary"))
    return Panel(html.Div(body), tuple(debuggers))


def render_datapoint(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str],
                     idx: Optional[int], chosen: Optional[list[str]] = None) -> html.Div:
    """What the Datapoint tab shows (see ``build_panel``)."""
    return build_panel(backend, run_path, epoch_key, idx, chosen).body


class Panels:
    """Drawn panels by what they show; ``draw_ahead`` draws the open datapoint's neighbours in the table
    in one background thread (only the latest request is worked on: holding ``j`` queues nothing)."""

    def __init__(self, backend: ViewerBackend, kept: int = PANELS_KEPT) -> None:
        self.backend = backend
        self._drawn: BoundedCache[Panel] = BoundedCache(kept)
        self._ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="viewer-draw-ahead")
        self._wanted: Optional[tuple] = None
        self._lock = threading.Lock()

    def get(self, run_path: Optional[str], epoch_key: Optional[str], idx: Optional[int],
            chosen: Optional[list[str]]) -> Panel:
        run = self.backend.run(run_path)
        epoch = self.backend.epoch(run, epoch_key) if run else None

        def build() -> Panel:
            return draw_panel(self.backend, run, epoch, idx, chosen)

        key = self._key(run, epoch, idx, chosen)
        return build() if key is None else self._drawn.get(key, build)

    def draw_ahead(self, query: dict, request: dict, row: Optional[int], chosen: Optional[list[str]]) -> None:
        with self._lock:
            self._wanted = (query, request, row, chosen)
        self._ahead.submit(self._draw_wanted)

    def _draw_wanted(self) -> None:
        with self._lock:
            wanted, self._wanted = self._wanted, None
        if wanted is None:
            return
        query, request, row, chosen = wanted
        start = 0 if not isinstance(row, int) else max(row - 1, 0)
        try:
            rows, _, _, _ = table_rows(self.backend, query, replace(paging(request), start=start, end=start + 3))
        except (*TABLE_ERRORS, BadRequest):
            return
        for found in rows:
            try:
                self.get(query.get("run"), query.get("epoch"), found["idx"], chosen)
            except Exception:  # drawing ahead is a guess: a failure shows when the datapoint is opened
                continue

    def _key(self, run: Optional[Run], epoch: Optional[Epoch], idx: Optional[int],
             chosen: Optional[list[str]]) -> Optional[tuple]:
        if run is None or epoch is None or idx is None:
            return None
        try:
            version = self.backend.datapoint_version(run, epoch)
        except ScoresError:
            return None
        return run.path, epoch.key, version, int(idx), None if chosen is None else tuple(chosen)


def datapoint_tab(backend: ViewerBackend, first: FirstView) -> dcc.Tab:
    """The tab as the first page shows it: the open datapoint drawn, with its tick boxes, when it is the tab the page
    opens on, so the page runs no callback for it before it is usable."""
    panel, debuggers, shown, drawn_for = NOTHING_OPEN, [], None, None
    if first.tab == TAB_DATAPOINT:
        drawn = build_panel(backend, first.run, first.epoch, first.idx)
        panel, debuggers = drawn.body, list(drawn.debuggers)
        shown = shown_debuggers(debuggers, None) if debuggers else None
        drawn_for = None if first.idx is None else [first.idx, first.run, first.epoch]
    return tab_of("Datapoint", TAB_DATAPOINT, [
        dcc.Checklist(id=DEBUGGER_PICK, options=debuggers, value=shown, inline=True, className="debugger-pick"),
        *pending_status(DATAPOINT_STATUS, DATAPOINT_DRAWN, first.idx, drawn_for),
        html.Div(panel, id=DATAPOINT_PANEL, className="datapoint-panel")])
