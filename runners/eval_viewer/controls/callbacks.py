"""The run list and the chosen run's epochs, kept current while runs are still being written.

The first page comes with its run, epoch, metric and table already chosen (``layout/page.py``);
these callbacks follow the user's switches and a run that is still training.
"""

from __future__ import annotations

from typing import Optional

from dash import Dash, Input, Output, State, no_update

from runners.eval_viewer.controls.view import problem_alerts, run_options
from runners.eval_viewer.shared import ids
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.components import default_epoch, epoch_option


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(ids.RUN_SELECT, "options"), Output(ids.MESSAGES, "children"),
                  Input(ids.REFRESH, "data"), State(ids.RUN_SELECT, "options"), prevent_initial_call=True)
    def refresh_runs(_: Optional[int], current: list) -> tuple:
        discovery = backend.refresh()
        options = run_options(discovery)
        return (no_update, no_update) if options == current else (options, problem_alerts(discovery))

    @app.callback(Output(ids.EPOCH_SELECT, "options"), Output(ids.EPOCH_SELECT, "value"),
                  Output(ids.EPOCHS_RUN, "data"), Input(ids.RUN_SELECT, "value"), Input(ids.REFRESH, "data"),
                  State(ids.EPOCH_SELECT, "value"), State(ids.EPOCH_SELECT, "options"), State(ids.EPOCHS_RUN, "data"),
                  State(ids.FOLLOW_LATEST, "value"), prevent_initial_call=True)
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
        }""", Output(ids.EPOCH_SELECT, "value", allow_duplicate=True), Input(ids.FOLLOW_LATEST, "value"),
        State(ids.EPOCH_SELECT, "options"), prevent_initial_call=True)
    app.clientside_callback(  # the "nearest epoch with debug outputs" button beside the badges
        """function(clicks, key) { return clicks && key ? key : window.dash_clientside.no_update; }""",
        Output(ids.EPOCH_SELECT, "value", allow_duplicate=True), Input(ids.NEAREST_DEBUG_EPOCH, "n_clicks"),
        State(ids.NEAREST_DEBUG_EPOCH, "value"), prevent_initial_call=True)
