"""The Datapoint tab's Dash components of values and figures: an image with its prompt marked, a dict as a table,
a one-table figure as text, a graph drawn once in view, a picture. Apart from the figures and values they show
(``values``, ``pictures``), which the HTML export draws without Dash."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import plotly.graph_objects as go
from dash import html

from runners.eval_viewer.figures.base import MAX_TABLE_ROWS, png_data_uri, table_height
from runners.eval_viewer.figures.pictures import picture_source
from runners.eval_viewer.figures.values import array_or_none, as_image, table_text, value_summary

FIGURE_TITLE = {"fontSize": "14px", "color": "#2a3f5f", "margin": "4px 0"}  # as plotly titles the graphs beside it


def image_component(image: np.ndarray, title: str, points: Optional[np.ndarray] = None) -> html.Figure:
    """An image as a plain ``<img>`` (a PNG built here) under its title: no plotly graph to draw on a click; each of
    ``points`` ((x, y) in its pixels) marked over it by a ring that shows on any colour (``viewer.css``)."""
    pixels = (np.nan_to_num(image) * 255).round().astype(np.uint8)
    height, width = image.shape[:2]
    marks = [html.Span(className="point-mark", title=f"prompt ({x:.4g}, {y:.4g})",
                       style={"left": f"{100 * x / width:.2f}%", "top": f"{100 * y / height:.2f}%"})
             for x, y in (points if points is not None else [])]
    picture = html.Div([html.Img(src=png_data_uri(pixels), alt=title, style={"width": "100%",
                                                                             "imageRendering": "pixelated"}),
                        *marks], className="marked-image")
    return html.Figure([html.Figcaption(title, className="figure-title", style=FIGURE_TITLE), picture],
                       className="datapoint-image")


def lazy_graph(figure: go.Figure, class_name: str) -> html.Div:
    """A graph the page draws once it comes into view (``assets/lazy_graphs.js``), so a click draws the graphs on
    screen only; its height is kept meanwhile. The figure travels as JSON, converted once with the panel."""
    return html.Div(className=f"{class_name} lazy-graph", style={"height": f"{figure.layout.height or 450}px"},
                    **{"data-figure": figure.to_json()})


def table_component(figure: go.Figure, class_name: str) -> html.Figure:
    """The cells of a one-table figure (``figures._table``) under its title, as aligned columns of
    text: one component, where an HTML table costs the page's renderer one per cell on every click."""
    title = html.Figcaption(str(figure.layout.title.text or ""), className="figure-title", style=FIGURE_TITLE)
    text = html.Pre(table_text(figure), className="figure-table", style={
        "maxHeight": f"{table_height(MAX_TABLE_ROWS)}px", "overflow": "auto", "fontSize": "12px"})
    return html.Figure([title, text], className=f"{class_name} table-figure")


def value_component(name: str, value: Any, points: Optional[np.ndarray] = None) -> Any:
    """An image for image-shaped values (``points`` marked over it), a table for dicts, text otherwise."""
    image = as_image(value)
    if image is not None:
        return image_component(image, f"{name} {tuple(array_or_none(value).shape)}", points)
    if isinstance(value, dict):
        return html.Div([html.Strong(name), key_value_table(value)])
    return html.Div([html.Strong(f"{name}: "), html.Span(value_summary(value))])


def key_value_table(mapping: dict) -> html.Table:
    rows = [html.Tr([html.Th(str(key)), html.Td(value_summary(value))]) for key, value in mapping.items()]
    return html.Table(html.Tbody(rows), className="key-value-table")


def picture_component(figure: go.Figure, class_name: str) -> html.Figure:
    """A picture figure (``is_picture``) as one image: a mosaic of maps (``layout.meta['tiles']``) or panels of a
    heatmap over an image, with one colour bar; its colour range on hover."""
    source, span = picture_source(figure)
    title = str(figure.layout.title.text or "")
    image = html.Img(src=source, alt=title, title=span, className="picture")
    return html.Figure([html.Figcaption(title, className="figure-title", style=FIGURE_TITLE), image],
                       className=f"{class_name} picture-figure")
