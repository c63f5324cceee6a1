"""The run list and the chosen run's epochs, kept current while runs are still being written.

The first page comes with its run, epoch, metric and table already chosen (``layout/page.py``);
these callbacks follow the user's switches and a run that is still training.
"""

from __future__ import annotations

from typing import Optional

from dash import Dash, Input, Output, State, ctx, no_update

from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.callbacks.components import default_epoch, epoch_option
from runners.eval_viewer.layout import ids
from runners.eval_viewer.layout.controls import problem_alerts, run_options


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(ids.RUN_SELECT, "options"), Output(ids.MESSAGES, "children"),
                  Input(ids.REFRESH, "n_intervals"), State(ids.RUN_SELECT, "options"), prevent_initial_call=True)
    def refresh_runs(_: int, current: list) -> tuple:
        discovery = backend.refresh()
        options = run_options(discovery)
        return (no_update, no_update) if options == current else (options, problem_alerts(discovery))

    @app.callback(Output(ids.EPOCH_SELECT, "options"), Output(ids.EPOCH_SELECT, "value"),
                  Input(ids.RUN_SELECT, "value"), Input(ids.REFRESH, "n_intervals"),
                  State(ids.EPOCH_SELECT, "value"), State(ids.EPOCH_SELECT, "options"), prevent_initial_call=True)
    def refresh_epochs(run_path: Optional[str], _: int, current: Optional[str], current_options: list) -> tuple:
        """On a run switch, its latest epoch with debug outputs, always sent (even when its key is the one
        shown) so that what follows the epoch follows the new run; while a run trains, new epochs appear."""
        run = backend.run(run_path)
        epochs = backend.epochs(run) if run else []
        options = [epoch_option(e) for e in epochs]
        if ctx.triggered_id == ids.RUN_SELECT:
            return options, default_epoch(epochs)
        if options == current_options:
            return no_update, no_update
        return options, current if current in {e.key for e in epochs} else default_epoch(epochs)

    app.clientside_callback(  # the "nearest epoch with debug outputs" button beside the badges
        """function(clicks, key) { return clicks && key ? key : window.dash_clientside.no_update; }""",
        Output(ids.EPOCH_SELECT, "value", allow_duplicate=True), Input(ids.NEAREST_DEBUG_EPOCH, "n_clicks"),
        State(ids.NEAREST_DEBUG_EPOCH, "value"), prevent_initial_call=True)
