"""Panels say "loading datapoint N …" until they show the datapoint asked for.

A panel is drawn by a server callback, which can take seconds (Compare epochs on a loaded machine); until its
answer lands the panel would go on showing the datapoint it showed before, as if it were the one asked for. So
each panel has a status line and a store of what it shows (``DRAWN``: the values it was drawn for, in the order
of ``WANTS``), both written by the callback that draws it, with the panel (the status emptied). Whenever what is
asked for changes, the browser compares it with what is drawn and says "loading" at once; ``viewer.css`` dims the
Datapoint tab under a status (drawn in a blink, it would flicker if emptied) and hides a comparison under one
(drawn in seconds). The browser reads ``DRAWN`` from the page's state rather than as a callback's input: Dash
holds back a callback whose inputs a pending callback writes, so the word would come only with the answer.
"""

from __future__ import annotations

import json
from typing import Optional

from dash import Dash, Input, Output

from runners.eval_viewer.shared import ids
from runners.eval_viewer.shared.backend import ViewerBackend

# What each panel is asked to show, first the open idx: (status line, drawn store, wanted (id, property) pairs).
WANTS = {
    ids.DATAPOINT_PANEL: (ids.DATAPOINT_STATUS, ids.DATAPOINT_DRAWN,
                          ((ids.SELECTED, "data"), (ids.RUN_SELECT, "value"), (ids.EPOCH_SELECT, "value"))),
    ids.COMPARE_EPOCHS_PANEL: (ids.COMPARE_EPOCHS_STATUS, ids.COMPARE_EPOCHS_DRAWN,
                               ((ids.SELECTED, "data"), (ids.RUN_SELECT, "value"),
                                (ids.COMPARE_EPOCHS_SELECT, "value"))),
    ids.COMPARE_RUNS_PANEL: (ids.COMPARE_RUNS_STATUS, ids.COMPARE_RUNS_DRAWN,
                             ((ids.SELECTED, "data"), (ids.RUN_SELECT, "value"), (ids.EPOCH_SELECT, "value"),
                              (ids.COMPARE_RUN_SELECT, "value"), (ids.COMPARE_RUN_EPOCH_SELECT, "value"))),
}
_STATUS = """function() {
    const wanted = Array.from(arguments);
    const idx = wanted[0];
    const store = window.dash_component_api.getLayout(DRAWN);
    const drawn = store && store.props ? store.props.data : null;
    if (idx === null || idx === undefined || JSON.stringify(wanted) === JSON.stringify(drawn || null)) {
        return window.dash_clientside.no_update;
    }
    return LOADING;
}"""


def loading(idx: Optional[int]) -> str:
    """The status line of a panel asked for ``idx`` that does not show it yet ('' when nothing is asked for)."""
    return "" if idx is None else f"loading datapoint {idx} …"


def register(app: Dash, backend: ViewerBackend) -> None:
    for status, drawn_store, wanted in WANTS.values():
        script = _STATUS.replace("DRAWN", json.dumps(drawn_store)).replace("LOADING", "`loading datapoint ${idx} …`")
        app.clientside_callback(script, Output(status, "children", allow_duplicate=True),
                                *[Input(component, prop) for component, prop in wanted], prevent_initial_call=True)
