"""The run list and the chosen run's epochs, kept current while runs are still being written.

The first page comes with its run, epoch, metric and table already chosen (``page.py``); these callbacks follow the
user's switches and a run that is still training. What changed on disk is asked outside Dash's callbacks: Dash holds
back every callback downstream of one in flight, and the refresh is upstream of nearly everything (the run list, the
epochs, the table's query), so a refresh on a timer (a ``dcc.Interval``), its answers slower than its period on a
loaded machine, kept a panel asked for by a link from ever being drawn. The page's script (``assets/refresh.js``)
asks ``CHANGES_ROUTE`` every ``view.REFRESH_MS`` and ticks ``REFRESH`` only when the answer differs: a page over runs
that do not change runs no callback at all.
"""

from __future__ import annotations

from typing import Optional

import flask
from dash import Dash, Input, Output, State, no_update

from runners.eval_viewer.controls.data import default_epoch, disk_state, epoch_option, run_options
from runners.eval_viewer.controls.ids import (
    EPOCH_SELECT,
    EPOCHS_RUN,
    FOLLOW_LATEST,
    MESSAGES,
    NEAREST_DEBUG_EPOCH,
    REFRESH,
    RUN_SELECT,
    SENDS,
)
from runners.eval_viewer.controls.view import problem_alerts
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.feature import Feature

CHANGES_ROUTE = "_lantern/changes"  # under the app's routes prefix; the page asks it relative to its own address


def register(app: Dash, backend: ViewerBackend) -> None:
    _follow_runs(app, backend)
    _follow_epochs(app, backend)

    @app.server.route(f"{app.config.routes_pathname_prefix}{CHANGES_ROUTE}")
    def changes() -> flask.Response:
        return flask.jsonify(disk_state(backend, flask.request.args.get("run"), flask.request.args.get("epoch")))


def _follow_runs(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(RUN_SELECT, "options"), Output(MESSAGES, "children"),
                  Input(REFRESH, "data"), State(RUN_SELECT, "options"), prevent_initial_call=True)
    def refresh_runs(_: Optional[int], current: list) -> tuple:
        discovery = backend.refresh()
        options = run_options(discovery)
        return (no_update, no_update) if options == current else (options, problem_alerts(discovery))


def _follow_epochs(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(EPOCH_SELECT, "options"), Output(EPOCH_SELECT, "value"),
                  Output(EPOCHS_RUN, "data"), Input(RUN_SELECT, "value"), Input(REFRESH, "data"),
                  State(EPOCH_SELECT, "value"), State(EPOCH_SELECT, "options"), State(EPOCHS_RUN, "data"),
                  State(FOLLOW_LATEST, "value"), prevent_initial_call=True)
    def refresh_epochs(run_path: Optional[str], _: Optional[int], current: Optional[str], current_options: list,
                       listed_run: Optional[str], follow: Optional[list]) -> tuple:
        """On a run switch, its latest epoch with debug outputs, always sent (even when its key is the one
        shown) so that what follows the epoch follows the new run; while a run trains, new epochs appear.
        A switch is told by the run the listed epochs are of, not by which input fired: Dash drops a call's
        answer when the callback fires again before it comes back (a refresh tick during a switch), and the
        later call must then make the switch. With "follow the latest epoch" ticked, a new epoch is opened as it
        comes."""
        run = backend.run(run_path)
        epochs = backend.epochs(run) if run else []
        options = [epoch_option(e) for e in epochs]
        if run_path != listed_run:
            return options, default_epoch(epochs), run_path
        if options == current_options:
            return no_update, no_update, no_update
        if follow and epochs:
            return options, epochs[-1].key, no_update
        return options, current if current in {e.key for e in epochs} else default_epoch(epochs), no_update

    app.clientside_callback(  # "follow the latest epoch" ticked: open the latest now
        """function(follow, options) {
            return (follow || []).length && (options || []).length ? options[options.length - 1].value
                : window.dash_clientside.no_update;
        }""", Output(EPOCH_SELECT, "value", allow_duplicate=True), Input(FOLLOW_LATEST, "value"),
        State(EPOCH_SELECT, "options"), prevent_initial_call=True)
    app.clientside_callback(  # the "nearest epoch with debug outputs" button beside the badges
        """function(clicks, key) { return clicks && key ? key : window.dash_clientside.no_update; }""",
        Output(EPOCH_SELECT, "value", allow_duplicate=True), Input(NEAREST_DEBUG_EPOCH, "n_clicks"),
        State(NEAREST_DEBUG_EPOCH, "value"), prevent_initial_call=True)


FEATURE = Feature(register, SENDS)
