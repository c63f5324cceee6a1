"""Panels of a tab are drawn only while their tab is shown, and say "loading datapoint N …" until they show the
datapoint asked for.

A panel is drawn by a server callback, which can take seconds (Compare epochs on a loaded machine); until its
answer lands the panel would go on showing the datapoint it showed before, as if it were the one asked for. So
each panel has a status line and a store of what it shows (its ``DRAWN`` store: the values it was drawn for, in the
order of what it is asked for, first the open idx), both written by the callback that draws it, with the panel (the
status emptied). Whenever what is asked for changes, the browser compares it with what is drawn and says "loading"
at once (``status_script``, wired by ``opened.follow_status``); ``viewer.css`` dims the Datapoint tab under a status
(drawn in a blink, it would flicker if emptied) and hides a comparison under one (drawn in seconds). The browser
reads ``DRAWN`` from the page's state rather than as a callback's input: Dash holds back a callback whose inputs a
pending callback writes, so the word would come only with the answer.
"""

from __future__ import annotations

import json
from typing import Optional

from dash import dcc, html

from runners.eval_viewer.shared.ids import TABS

_STATUS = """function() {
    // What the panel is asked for, read from the page's state: the callback that runs this is set off by any of it
    // and by its tab shown, but the open idx comes through the one callback of an open datapoint
    // (shared/opened.py). A hidden tab's panel under a status stays hidden however many datapoints open meanwhile:
    // its words are set once, and made right when the tab is shown (a status set every time cost every j).
    const props = ([id, prop]) => ((window.dash_component_api.getLayout(id) || {}).props || {})[prop];
    const none = window.dash_clientside.no_update;
    const wanted = ASKED.map(props);
    const idx = wanted[0], shown = props(SHOWN_TAB) === TAB, status = String(props(STATUS) || '');
    if (idx === null || idx === undefined || JSON.stringify(wanted) === JSON.stringify(props(DRAWN) || null)) {
        return shown && status.startsWith('loading datapoint') ? '' : none;  // its own word only
    }
    return shown || !status ? `loading datapoint ${idx} …` : none;
}"""


_WHILE_SHOWN = """function(idx, tab) {
    return tab === 'TAB' ? {idx: idx === undefined ? null : idx} : window.dash_clientside.no_update;
}"""


def while_shown_script(tab: str) -> str:
    """The browser's script that passes the open idx (as ``{idx}``) to a panel's store only while its ``tab`` is
    shown: nothing is computed for a hidden tab, and a click on another tab sends no request for it."""
    return _WHILE_SHOWN.replace("TAB", tab)


def loading(idx: Optional[int]) -> str:
    """The status line of a panel asked for ``idx`` that does not show it yet ('' when nothing is asked for)."""
    return "" if idx is None else f"loading datapoint {idx} …"


def status_script(tab: str, status: str, drawn: str, asked: list[tuple[str, str]]) -> str:
    """The browser's text for the ``status`` line of the panel of ``tab`` whose ``drawn`` store holds what it shows:
    given what the panel is asked for (``asked``: components and properties, first the open idx's), "loading
    datapoint N …" unless it shows that already (then none); while the tab is hidden, only a status where there
    was none (``viewer.css`` hides the panel under it)."""
    return (_STATUS.replace("DRAWN", json.dumps([drawn, "data"])).replace("ASKED", json.dumps(asked))
            .replace("STATUS", json.dumps([status, "children"])).replace("SHOWN_TAB", json.dumps([TABS, "value"]))
            .replace("TAB", json.dumps(tab)))


def pending_status(status: str, drawn: str, idx: Optional[int], data: Optional[list] = None) -> list:
    """A panel's status line (loading ``idx`` where the panel is not ``data``, drawn for it) and the store of what it
    shows; a store of nothing drawn is given no data (a Store given None sets it again when it mounts, which would
    run its callbacks)."""
    return [dcc.Store(id=drawn, **({} if data is None else {"data": data})),
            html.Div("" if data else loading(idx), id=status, className="panel-status", role="status")]
