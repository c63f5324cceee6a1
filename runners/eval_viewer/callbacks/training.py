"""The Training tab's callback: draw the chosen run's training monitor file, and redraw it as the run appends.

The tab is drawn when it is shown, when the run or the histogram's layer changes, and on the page's refresh
tick (``layout.controls.REFRESH_MS``, passed on by the page only while the tab is shown) when the file changed
since it was drawn (``layout.training.SHOWN`` holds the run, file version and layer drawn), so a run still
training is followed and an idle one costs a ``stat``.
"""

from __future__ import annotations

from typing import Optional

from dash import Dash, Input, Output, State, html, no_update

from data.viewer.layout.display.training_figures import histogram_figure, loss_figure, norm_heatmap
from run_dir.errors import RunFileError
from run_dir.names import MONITOR_FILE
from runners.eval_viewer.backend.training import TRAINING_LOGS
from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.callbacks.components import message
from runners.eval_viewer.layout import ids
from runners.eval_viewer.layout import training as layout

NO_FILE = (f"{{run}} has no {MONITOR_FILE}: its config did not ask for the training monitor. Add "
           "'training_monitor': True to a trainer's config to record the loss, learning rate, per-layer gradient "
           "norms and NaN/Inf checks while it trains (docs/training_monitor.md).")


def training_content(backend: ViewerBackend, run_path: Optional[str], layer: Optional[int]) -> layout.TrainingContent:
    """What the tab shows for a run: a message when there is nothing to draw, else the summary and the figures."""
    run = backend.run(run_path)
    if run is None:
        return layout.TrainingContent([html.P(layout.NO_RUN, className="hint")])
    version = TRAINING_LOGS.version(run)
    shown = {"run": run.path, "version": version, "layer": layer}
    if version is None:
        return layout.TrainingContent([message(NO_FILE.format(run=run.name), "secondary")], shown=shown)
    try:
        log = TRAINING_LOGS.read(run)
    except (OSError, RunFileError) as exc:
        return layout.TrainingContent([message(f"{MONITOR_FILE} of {run.name} cannot be read: {exc}", "danger")],
                                      shown=shown)
    if not log.layers:
        return layout.TrainingContent([message(f"{run.name}'s {MONITOR_FILE} holds no rows yet.", "secondary")],
                                      shown=shown)
    chosen = layer if isinstance(layer, int) and 0 <= layer < len(log.layers) else 0
    figures = {layout.LOSS_CHART: loss_figure(log), layout.GRAD_CHART: norm_heatmap(log, "grad_norm"),
               layout.UPDATE_CHART: norm_heatmap(log, "update_ratio"),
               layout.HISTOGRAM_CHART: histogram_figure(log, chosen)}
    options = [{"label": f"{name} ({kind})", "value": i} for i, (name, kind) in enumerate(zip(log.layers,
                                                                                           log.layer_types))]
    return layout.TrainingContent(layout.summary_view(log, run.name), {k: f.to_dict() for k, f in figures.items()},
                                  options, chosen, {**shown, "layer": chosen})


def register(app: Dash, backend: ViewerBackend) -> None:
    charts = (layout.LOSS_CHART, layout.GRAD_CHART, layout.UPDATE_CHART, layout.HISTOGRAM_CHART)
    app.clientside_callback(  # the refresh tick, passed on only while the tab is shown
        f"""function(tick, tab) {{ return tab === '{ids.TAB_TRAINING}' ? tick : window.dash_clientside.no_update; }}""",
        Output(layout.TICK, "data"), Input(ids.REFRESH, "data"), State(ids.TABS, "value"),
        prevent_initial_call=True)

    @app.callback(Output(layout.SUMMARY, "children"), *(Output(chart, "figure") for chart in charts),
                  Output(layout.FIGURES, "style"), Output(layout.LAYER_SELECT, "options"),
                  Output(layout.LAYER_SELECT, "value"), Output(layout.SHOWN, "data"),
                  Input(ids.TABS, "value"), Input(ids.RUN_SELECT, "value"), Input(layout.TICK, "data"),
                  Input(layout.LAYER_SELECT, "value"), State(layout.SHOWN, "data"),
                  prevent_initial_call=True)  # a first page on this tab comes drawn (layout/panels.py)
    def show_training(tab: Optional[str], run_path: Optional[str], _: int, layer: Optional[int],
                      shown: Optional[dict]) -> tuple:
        nothing = (no_update,) * (len(charts) + 5)
        if tab != ids.TAB_TRAINING:
            return nothing
        run = backend.run(run_path)
        if shown and run is not None and shown == {"run": run.path, "version": TRAINING_LOGS.version(run),
                                                   "layer": layer}:
            return nothing  # a refresh tick with nothing new
        content = training_content(backend, run_path, layer)
        return (content.summary, *(content.figures.get(chart, {}) for chart in charts), content.style,
                content.layers, content.layer, content.shown)
