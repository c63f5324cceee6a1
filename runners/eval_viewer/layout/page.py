"""The whole page: header, controls, score views on the left, datapoint tabs on the right."""

from __future__ import annotations

from dash import dcc, html

from runners.eval_viewer.backend.runs import Discovery
from runners.eval_viewer.layout import ids
from runners.eval_viewer.layout.controls import controls
from runners.eval_viewer.layout.panels import datapoint_navigation, datapoint_tabs
from runners.eval_viewer.layout.scores import score_views


def build_layout(discovery: Discovery) -> html.Div:
    return html.Div([
        html.Header(html.H2("Lantern eval viewer"), className="viewer-header"),
        controls(discovery),
        dcc.Store(id=ids.SELECTED),
        dcc.Store(id=ids.SELECTED_ROW),
        html.Div([html.Div(score_views(), className="left"),
                  html.Div([datapoint_navigation(), datapoint_tabs()], className="right")], className="main"),
    ], className="viewer")
