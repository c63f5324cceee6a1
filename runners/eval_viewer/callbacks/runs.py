"""Run, epoch and metric choices, kept current while runs are still being written."""

from __future__ import annotations

from typing import Optional

from dash import Dash, Input, Output, State, ctx, no_update

from runners.eval_viewer.backend.scores import ScoresError, default_metric
from runners.eval_viewer.backend.table import TABLE_ERRORS
from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.callbacks.components import default_epoch, epoch_badges, epoch_option
from runners.eval_viewer.layout import ids
from runners.eval_viewer.layout.controls import problem_alerts, run_options


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(ids.RUN_SELECT, "options"), Output(ids.MESSAGES, "children"),
                  Input(ids.REFRESH, "n_intervals"), State(ids.RUN_SELECT, "options"), prevent_initial_call=True)
    def refresh_runs(_: int, current: list) -> tuple:
        discovery = backend.refresh()
        options = run_options(discovery)
        return (no_update, no_update) if options == current else (options, problem_alerts(discovery))

    @app.callback(Output(ids.RUN_SELECT, "value"), Input(ids.URL_STATE, "data"), State(ids.RUN_SELECT, "options"),
                  prevent_initial_call=True)
    def run_from_url(state: Optional[dict], options: list) -> object:
        run = (state or {}).get("run")
        return run if run in {option["value"] for option in options or []} else no_update

    @app.callback(Output(ids.EPOCH_SELECT, "options"), Output(ids.EPOCH_SELECT, "value"),
                  Input(ids.RUN_SELECT, "value"), Input(ids.REFRESH, "n_intervals"),
                  State(ids.EPOCH_SELECT, "value"), State(ids.EPOCH_SELECT, "options"), State(ids.URL_STATE, "data"))
    def refresh_epochs(run_path: Optional[str], _: int, current: Optional[str], current_options: list,
                       url: Optional[dict]) -> tuple:
        """The run's epochs; the epoch in the URL when the page opens on it, else the latest with debug outputs."""
        run = backend.run(run_path)
        epochs = backend.epochs(run) if run else []
        options = [epoch_option(e) for e in epochs]
        keys = {e.key for e in epochs}
        url = url or {}
        run_changed = f"{ids.RUN_SELECT}.value" in ctx.triggered_prop_ids
        if not run_changed and current in keys:
            value = current
        elif url.get("run") == run_path and url.get("epoch") in keys:
            value = url["epoch"]
        else:
            value = default_epoch(epochs)
        if options == current_options and value == current:
            return no_update, no_update
        return options, value

    @app.callback(Output(ids.EPOCH_BADGES, "children"), Output(ids.EPOCH_VERSION, "data"),
                  Input(ids.RUN_SELECT, "value"), Input(ids.EPOCH_SELECT, "value"), Input(ids.REFRESH, "n_intervals"),
                  State(ids.EPOCH_VERSION, "data"))
    def show_epoch_status(run_path: Optional[str], epoch_key: Optional[str], _: int, seen: Optional[str]) -> tuple:
        """Badges, and a new version only when the epoch's files changed (the score views then redraw)."""
        run = backend.run(run_path)
        epoch = backend.epoch(run, epoch_key) if run else None
        if epoch is None:
            return [], None
        try:
            version = backend.version(epoch)
        except ScoresError:
            version = None  # removed while listed: the score views say so when they redraw
        return epoch_badges(backend, epoch), no_update if version == seen else version

    @app.callback(Output(ids.METRIC_SELECT, "options"), Output(ids.METRIC_SELECT, "value"),
                  Input(ids.RUN_SELECT, "value"), Input(ids.EPOCH_SELECT, "value"), State(ids.METRIC_SELECT, "value"))
    def choose_metric(run_path: Optional[str], epoch_key: Optional[str], current: Optional[str]) -> tuple:
        run = backend.run(run_path)
        epoch = backend.epoch(run, epoch_key) if run else None
        try:
            metrics = backend.metrics(epoch) if epoch else []
            directions = backend.table(epoch).roles.get("higher_is_better", {}) if epoch else {}
        except TABLE_ERRORS:
            return no_update, no_update  # the scores view says why; keep the last metric for the next epoch
        return metrics, current if current in metrics else default_metric(metrics, directions)
