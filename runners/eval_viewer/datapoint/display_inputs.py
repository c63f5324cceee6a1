"""The Inputs section: every input of the datapoint, images drawn as images, with the prompt points (an input named
as ``values.POINT_NAMES`` says) marked over the input image and written as (x, y)."""

from __future__ import annotations

from typing import Any

from dash import html

from runners.eval_viewer.figures.components import value_component
from runners.eval_viewer.figures.values import POINT_NAMES, as_image, points_text, prompt_points


def display_inputs(inputs: dict[str, Any]) -> html.Div:
    points = prompt_points(inputs)
    marked = next((name for name, value in inputs.items() if as_image(value) is not None), None)
    shown = []
    for name, value in inputs.items():
        if points is not None and str(name).lower() in POINT_NAMES:
            where = ", marked ○ on " + str(marked) if marked is not None else ""
            shown.append(html.Div([html.Strong(f"{name}: "), html.Span(points_text(points) + where)],
                                  className="prompt-points"))
        else:
            shown.append(value_component(name, value, points if name == marked else None))
    return html.Div(shown, className="value-list")
