"""The Labels section: class indices as numbers, dense labels (masks, maps) as images."""

from __future__ import annotations

from typing import Any

from dash import html

from data.viewer.layout.display.values import value_component


def display_labels(labels: dict[str, Any]) -> html.Div:
    return html.Div([value_component(name, value) for name, value in labels.items()], className="value-list")
