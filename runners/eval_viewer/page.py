"""The whole page: header, controls, score views and the table on the left, the features' tabs on the right.

The page comes with everything it shows first already chosen (run, epoch, metric, the
table's columns and query, the open datapoint and tab, from the address bar when it names
them), so opening it costs the browser one round of requests rather than a chain of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import parse_qs, urlsplit

import dash_bootstrap_components as dbc
import flask
from dash import dcc, html

from runners.eval_viewer.address.saved_views import FILTER_PREFIX
from runners.eval_viewer.address.view import saved_views
from runners.eval_viewer.controls.data import default_epoch, disk_state, epoch_option, most_recent_run
from runners.eval_viewer.controls.view import controls
from runners.eval_viewer.datapoint.ids import TAB_DATAPOINT
from runners.eval_viewer.embeddings.data import PREFIX as MAP_SELECTION
from runners.eval_viewer.embeddings.data import SelectionError, selection_narrowing
from runners.eval_viewer.export.view import export_button
from runners.eval_viewer.failures.data import FINDINGS_ERRORS, narrowing_of
from runners.eval_viewer.scores.view import score_chart, score_grid
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import typed_idx
from runners.eval_viewer.shared.feature import Tab
from runners.eval_viewer.shared.first_view import FirstView
from runners.eval_viewer.shared.ids import SELECTED, SELECTED_ROW, TABS
from runners.eval_viewer.table.view import epoch_view, navigation, table_block
from runners.eval_viewer.tags.view import tag_bar


def address_bar() -> dict[str, list[str]]:
    """The page's query string (``address/callbacks.py`` says what it holds), each key's values. Dash asks for the
    layout with a request of its own, whose Referer is the page's address; empty outside a request."""
    if not flask.has_request_context():
        return {}
    return parse_qs(urlsplit(flask.request.referrer or "").query)


def first_view(backend: ViewerBackend, address: Mapping[str, list[str]], tabs: Sequence[str]) -> FirstView:
    """The view the address names, each part where it exists (else the most recent run, its latest epoch with
    debug outputs, nothing open, the Datapoint tab and the table by its loss, worst first, unfiltered); what the
    address names that cannot be shown is said (``problems``). ``tabs``: the values of the tabs there are."""
    def one(key: str) -> str:
        return (address.get(key) or [""])[-1]

    discovery = backend.discovery
    run_path = one("run") if one("run") in discovery.runs else most_recent_run(discovery)
    run = backend.run(run_path)
    epochs = backend.epochs(run) if run else []
    follow = one("follow") == "1"
    epoch_key = one("epoch") if one("epoch") in {e.key for e in epochs} and not follow else \
        (epochs[-1].key if follow and epochs else default_epoch(epochs))
    idx = typed_idx(one("idx"))
    problems = [] if idx is not None or not one("idx") else [
        f"The address's idx={one('idx')[:40]!r} is not a dataset index (a whole number): no datapoint is "
        "opened. Click one in the table, or fix the address."]
    narrowing = None
    try:
        narrowing = (selection_narrowing if one("narrow").startswith(MAP_SELECTION) else narrowing_of)(
            backend, run_path, epoch_key, one("narrow"))
    except (*FINDINGS_ERRORS, SelectionError) as exc:
        problems.append(f"The address's finding {one('narrow')[:60]!r} cannot be shown: {exc}")
    if one("narrow") and narrowing is None and len(problems) < 2:
        problems.append(f"{epoch_key} has no finding {one('narrow')[:60]!r}: the table shows every datapoint.")
    tab = one("tab") if one("tab") in tabs else TAB_DATAPOINT
    view = epoch_view(backend, run_path, epoch_key, one("metric"), narrowing and narrowing["idx"], sort=one("sort"),
                      wrong=one("wrong") == "1")
    shown = {column.get("field") for column in view.columns}
    filters = {key[len(FILTER_PREFIX):]: values[-1] for key, values in address.items()
               if key.startswith(FILTER_PREFIX) and key[len(FILTER_PREFIX):] in shown}
    compare = {"epochs": address.get("cmp_epochs"), "run": one("cmp_run") or None, "epoch": one("cmp_epoch") or None}
    return FirstView(run_path, [epoch_option(e) for e in epochs], epoch_key, view, idx, tab, problems, filters,
                     narrowing, compare, [n for n in address.get("pin", []) if n in shown],
                     [n for n in address.get("hide", []) if n in shown], follow, address)


def build_layout(backend: ViewerBackend, address: Mapping[str, list[str]], tabs: Sequence[Tab]) -> html.Div:
    """The page the address names (``first_view``), the ``tabs`` on the right in their order."""
    backend.refresh()
    first = first_view(backend, address, [tab.value for tab in tabs])
    message, grid = score_grid(backend, first)
    return html.Div([
        dbc.Navbar(dbc.NavbarBrand("Lantern eval viewer"), color="dark", dark=True, class_name="viewer-header"),
        controls(backend.discovery, first, disk_state(backend, first.run, first.epoch),
                 saved_views(backend, first.run)),
        # A Store given data=None sets it again when it mounts (dcc's Store), which would run every callback of the
        # open datapoint at load: without one open, it is given no data at all.
        dcc.Store(id=SELECTED, **({} if first.idx is None else {"data": first.idx})),
        dcc.Store(id=SELECTED_ROW),
        html.Div([
            html.Div(html.Div([*score_chart(backend, first), message, *table_block(first), *grid],
                              className="score-views"), className="left"),
            html.Div([navigation(export_button()), tag_bar(backend, first),
                      dcc.Tabs(id=TABS, value=first.tab, children=[tab.draw(backend, first) for tab in tabs])],
                     className="right"),
        ], className="main"),
    ], className="viewer")
