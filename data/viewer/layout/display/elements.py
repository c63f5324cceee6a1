"""Alerts, badges and cards as plain HTML with the classes ``assets/viewer.css`` styles: the page needs no
Bootstrap components bundle (220 kB of script to evaluate on every load) for these three."""

from __future__ import annotations

from typing import Any, Optional

from dash import html


def alert(children: Any, color: str = "info", class_name: str = "") -> html.Div:
    """A coloured message box (``color``: info, warning, danger, secondary, light)."""
    return html.Div(children, role="alert", className=f"alert alert-{color} {class_name}".strip())


def badge(text: str, color: str, class_name: str = "", title: Optional[str] = None) -> html.Span:
    """A small coloured label (``color``: info, warning, danger, success, secondary, light)."""
    return html.Span(text, className=f"badge bg-{color} {class_name}".strip(), **({"title": title} if title else {}))


def card(header: Any, body: Any, class_name: str = "") -> html.Div:
    """A bordered block with a header row."""
    return html.Div([html.Div(header, className="card-header"), html.Div(body, className="card-body")],
                    className=f"card {class_name}".strip())
