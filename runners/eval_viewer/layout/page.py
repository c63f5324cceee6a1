"""The whole page: header, controls, score views on the left, datapoint tabs on the right.

The page comes with everything it shows first already chosen (run, epoch, metric, the
table's columns and query, the open datapoint and tab, from the address bar when it names
them), so opening it costs the browser one round of requests rather than a chain of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import parse_qs, urlsplit

import flask
from dash import dcc, html

from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.callbacks.browser_input import typed_idx
from runners.eval_viewer.callbacks.components import default_epoch, epoch_option
from runners.eval_viewer.callbacks.refresh import disk_state
from runners.eval_viewer.callbacks.table import epoch_view
from runners.eval_viewer.layout import ids
from runners.eval_viewer.layout.controls import controls, most_recent_run, run_options
from runners.eval_viewer.layout.first_view import FirstView
from runners.eval_viewer.layout.panels import datapoint_navigation, datapoint_tabs
from runners.eval_viewer.layout.scores import score_views


def address_bar() -> dict[str, str]:
    """The page's query string (``?run=...&epoch=...&idx=...&tab=...&metric=...&sort=...``). Dash asks for the
    layout with a request of its own, whose Referer is the page's address; empty outside a request."""
    if not flask.has_request_context():
        return {}
    query = urlsplit(flask.request.referrer or "").query
    return {key: values[-1] for key, values in parse_qs(query).items()}


def first_view(backend: ViewerBackend, address: Mapping[str, str]) -> FirstView:
    """The run, epoch, datapoint, tab, metric and sort the address names where they exist, else the most recent
    run, its latest epoch with debug outputs, nothing open, the Datapoint tab and the table by its loss, worst
    first."""
    discovery = backend.discovery
    run_path = address.get("run") if address.get("run") in discovery.runs else most_recent_run(discovery)
    run = backend.run(run_path)
    epochs = backend.epochs(run) if run else []
    epoch_key = address.get("epoch") if address.get("epoch") in {e.key for e in epochs} else default_epoch(epochs)
    idx = typed_idx(address.get("idx", ""))
    problems = [] if idx is not None or not address.get("idx") else [
        f"The address's idx={address['idx'][:40]!r} is not a dataset index (a whole number): no datapoint is "
        "opened. Click one in the table, or fix the address."]
    tab = address.get("tab") if address.get("tab") in ids.TAB_VALUES else ids.TAB_DATAPOINT
    return FirstView(run_path, [epoch_option(e) for e in epochs], epoch_key,
                     epoch_view(backend, run_path, epoch_key, address.get("metric"), sort=address.get("sort")),
                     idx, tab, problems)


def build_layout(backend: ViewerBackend, address: Mapping[str, str]) -> html.Div:
    backend.refresh()
    first = first_view(backend, address)
    return html.Div([
        html.Header(html.H2("Lantern eval viewer"), className="viewer-header"),
        controls(backend.discovery, first, disk_state(backend, first.run, first.epoch)),
        # A Store given data=None sets it again when it mounts (dcc's Store), which would run every callback of the
        # open datapoint at load: without one open, it is given no data at all.
        dcc.Store(id=ids.SELECTED, **({} if first.idx is None else {"data": first.idx})),
        dcc.Store(id=ids.SELECTED_ROW),
        html.Div([html.Div(score_views(backend, first.run, first.epoch, first.view, first.idx), className="left"),
                  html.Div([datapoint_navigation(), datapoint_tabs(backend, first, run_options(backend.discovery))],
                           className="right")],
                 className="main"),
    ], className="viewer")
