"""The Datapoint tab: the open datapoint with its scores and the four sections."""

from __future__ import annotations

from typing import Optional

from dash import Dash, Input, Output, html, no_update

from data.viewer.layout.display import display_datapoint
from runners.eval_viewer.backend.datapoint import load_datapoint
from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.callbacks.components import (
    datapoint_title,
    epoch_badges,
    message,
    percentiles,
    score_badges,
)
from runners.eval_viewer.layout import ids
from runners.eval_viewer.layout.panels import NOTHING_OPEN


def render_datapoint(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str],
                     idx: Optional[int]) -> html.Div:
    """What the Datapoint tab shows; reads the dataset item and the one page holding ``idx``."""
    run = backend.run(run_path)
    epoch = backend.epoch(run, epoch_key) if run else None
    if epoch is None:
        return html.Div(message("Pick a run and an epoch."))
    if idx is None:
        return html.Div(message(NOTHING_OPEN))
    datapoint = load_datapoint(backend, run, epoch, int(idx))
    if datapoint.get("missing"):
        return html.Div([datapoint_title(run, epoch, idx), message(datapoint["missing"], "secondary")])
    badges = epoch_badges(backend, epoch) + score_badges(datapoint["scores"], percentiles(backend, epoch, datapoint))
    header = [datapoint_title(run, epoch, idx), html.Div(badges, className="badges")]
    if datapoint.get("scores_error"):
        header.append(message(datapoint["scores_error"], "warning"))
    return html.Div([*header, display_datapoint(datapoint)])


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(ids.DATAPOINT_PANEL, "children"), Input(ids.SELECTED, "data"),
                  Input(ids.RUN_SELECT, "value"), Input(ids.EPOCH_SELECT, "value"), Input(ids.TABS, "value"))
    def show_datapoint(idx: Optional[int], run_path: Optional[str], epoch_key: Optional[str], tab: str) -> object:
        if tab != ids.TAB_DATAPOINT:
            return no_update
        return render_datapoint(backend, run_path, epoch_key, idx)
