"""The Inputs section: every input of the datapoint, images drawn as images."""

from __future__ import annotations

from typing import Any

from dash import html

from runners.eval_viewer.figures.values import value_component


def display_inputs(inputs: dict[str, Any]) -> html.Div:
    return html.Div([value_component(name, value) for name, value in inputs.items()], className="value-list")
