"""What follows in the browser when a datapoint opens, run by one callback.

Opening a datapoint (``j`` above all) sets ``SELECTED``, and Dash runs every callback that takes it as an input. Each
callback costs the page a few store updates, and every store update runs the selector of every component on the
page, the open Debug Outputs panel's included: on the segmentation example, 14 callbacks took about 40 ms of a
``j``'s 200 before the panel's answer could be drawn. So the features' browser-side follow-ups of an open datapoint
(a row or tile marked, the address written, a hidden tab told, a status line) are scripts that one callback runs in
turn; each sets its component's property only when it has something to set (``dash_clientside.set_props``), so a
hidden tab costs the page nothing, and one the user does not wait on (the score grid's mark) runs once the page is
idle, after the datapoint is drawn (not the address: a reload at once would lose the datapoint). On that example a
``j`` went from 211-217 to 152-183 ms (``benchmarks/viewer_browser.py``, quiet).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional
from weakref import WeakKeyDictionary

from dash import Dash, Input, Output, State

from runners.eval_viewer.shared.ids import SELECTED, TABS
from runners.eval_viewer.shared.pending import status_script, while_shown_script


@dataclass(frozen=True)
class _FollowUp:
    script: str
    output: Optional[tuple[str, str]]
    when_idle: bool


_FOLLOW_UPS: WeakKeyDictionary[Dash, list[_FollowUp]] = WeakKeyDictionary()

_RUN_ALL = """function(idx, tab) {
    // Each follow-up in turn, those the user does not wait on once the page is idle (only the latest datapoint's);
    // one that fails is logged and the others still run.
    const none = window.dash_clientside.no_update;
    const idle = window.lanternIdleFollowUps = window.lanternIdleFollowUps || {};
    [FOLLOW_UPS].forEach(([script, output, whenIdle], place) => {
        const run = () => {
            try {
                const value = script(idx, tab);
                if (output && value !== none) { window.dash_clientside.set_props(output[0], {[output[1]]: value}); }
            } catch (error) {
                console.error('Lantern: a follow-up of the open datapoint failed', error);
            }
        };
        if (!whenIdle) { run(); return; }
        (window.cancelIdleCallback || clearTimeout)(idle[place]);
        idle[place] = window.requestIdleCallback ? requestIdleCallback(run, {timeout: 300}) : setTimeout(run, 50);
    });
}"""


def follow(app: Dash, script: str, output: Optional[tuple[str, str]] = None, when_idle: bool = False) -> None:
    """A follow-up of an open datapoint on ``app``: ``script``, a browser function of the open idx and the shown tab,
    returns the value ``output`` (a component's id and property) takes, or ``no_update``; without ``output`` it acts
    on the page itself (a row marked) and what it returns is dropped. ``when_idle``: it runs once the page is idle
    (within 300 ms), after the open datapoint is drawn (the score grid's mark moved)."""
    _FOLLOW_UPS.setdefault(app, []).append(_FollowUp(script, output, when_idle))


def register(app: Dash) -> None:
    """The one callback that runs the follow-ups of ``app`` whenever a datapoint opens (the first page comes with
    its datapoint followed up). Once every feature has added its own."""
    scripts = ",\n".join(f"[{follow_up.script}, {json.dumps(follow_up.output)}, {json.dumps(follow_up.when_idle)}]"
                          for follow_up in _FOLLOW_UPS.pop(app, []))
    app.clientside_callback(_RUN_ALL.replace("FOLLOW_UPS", scripts), Input(SELECTED, "data"),
                            State(TABS, "value"), prevent_initial_call=True)


def follow_status(app: Dash, tab: str, status: str, drawn: str, asked: list[tuple[str, str]]) -> None:
    """The status line of a panel of ``tab`` follows what the panel is asked for (``pending.status_script``): a
    callback for the tab shown and the parts of ``asked`` but the open idx, and a follow-up of an open datapoint."""
    script = status_script(tab, status, drawn, [(SELECTED, "data"), *asked])
    app.clientside_callback(script, Output(status, "children", allow_duplicate=True), Input(TABS, "value"),
                            *(Input(component, prop) for component, prop in asked), prevent_initial_call=True)
    follow(app, script, (status, "children"))


def follow_while_shown(app: Dash, tab: str, shown: str) -> None:
    """The open idx passed to the ``shown`` store of a panel of ``tab`` while the tab is shown
    (``pending.while_shown_script``): a callback for the tab shown, and a follow-up of an open datapoint."""
    app.clientside_callback(f"function(tab, idx) {{ return ({while_shown_script(tab)})(idx, tab); }}",
                            Output(shown, "data"), Input(TABS, "value"), State(SELECTED, "data"))
    follow(app, while_shown_script(tab), (shown, "data"))
