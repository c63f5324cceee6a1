"""The Training tab's callback: draw the chosen run's training monitor file, and redraw it as the run appends.

The tab is drawn when it is shown, when the run or the histogram's layer changes, and on the page's refresh
tick (``controls/view.REFRESH_MS``, passed on by the page only while the tab is shown) when the file changed
since it was drawn (``TRAINING_SHOWN`` holds the run, file version and layer drawn), so a run still
training is followed and an idle one costs a ``stat``.
"""

from __future__ import annotations

from typing import Optional

from dash import Dash, Input, Output, State, no_update

from runners.eval_viewer.controls.ids import REFRESH, RUN_SELECT
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.feature import Feature, Tab
from runners.eval_viewer.shared.ids import TABS
from runners.eval_viewer.training.data import tab_version
from runners.eval_viewer.training.ids import (
    SENDS,
    TAB_TRAINING,
    TRAINING_FIGURES,
    TRAINING_GRAD_CHART,
    TRAINING_HISTOGRAM_CHART,
    TRAINING_LAYER_SELECT,
    TRAINING_LOSS_CHART,
    TRAINING_SHOWN,
    TRAINING_SUMMARY,
    TRAINING_TICK,
    TRAINING_UPDATE_CHART,
)
from runners.eval_viewer.training.view import training_content, training_tab


def register(app: Dash, backend: ViewerBackend) -> None:
    charts = (TRAINING_LOSS_CHART, TRAINING_GRAD_CHART, TRAINING_UPDATE_CHART, TRAINING_HISTOGRAM_CHART)
    app.clientside_callback(  # the refresh tick, passed on only while the tab is shown
        f"""function(tick, tab) {{ return tab === '{TAB_TRAINING}' ? tick : window.dash_clientside.no_update; }}""",
        Output(TRAINING_TICK, "data"), Input(REFRESH, "data"), State(TABS, "value"),
        prevent_initial_call=True)

    @app.callback(Output(TRAINING_SUMMARY, "children"), *(Output(chart, "figure") for chart in charts),
                  Output(TRAINING_FIGURES, "style"), Output(TRAINING_LAYER_SELECT, "options"),
                  Output(TRAINING_LAYER_SELECT, "value"), Output(TRAINING_SHOWN, "data"),
                  Input(TABS, "value"), Input(RUN_SELECT, "value"), Input(TRAINING_TICK, "data"),
                  Input(TRAINING_LAYER_SELECT, "value"), State(TRAINING_SHOWN, "data"),
                  prevent_initial_call=True)  # a first page on this tab comes drawn (view.training_tab)
    def show_training(tab: Optional[str], run_path: Optional[str], _: int, layer: Optional[int],
                      shown: Optional[dict]) -> tuple:
        nothing = (no_update,) * (len(charts) + 5)
        if tab != TAB_TRAINING:
            return nothing
        run = backend.run(run_path)
        if shown and run is not None and shown == {"run": run.path, "version": tab_version(run), "layer": layer}:
            return nothing  # a refresh tick with nothing new
        content = training_content(backend, run_path, layer)
        return (content.summary, *(content.figures.get(chart, {}) for chart in charts), content.style,
                content.layers, content.layer, content.shown)


FEATURE = Feature(register, SENDS, Tab(TAB_TRAINING, training_tab))
