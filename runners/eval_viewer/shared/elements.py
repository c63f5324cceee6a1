"""Alerts, badges and cards: dash-bootstrap-components, the design card's layout library. Bootstrap's stylesheet is
served by the viewer itself (``runners/eval_viewer/assets/bootstrap.min.css``), so the page works offline."""

from __future__ import annotations

from typing import Any, Optional

import dash_bootstrap_components as dbc


def alert(children: Any, color: str = "info", class_name: str = "") -> dbc.Alert:
    """A coloured message box (``color``: info, warning, danger, secondary, light)."""
    return dbc.Alert(children, color=color, class_name=class_name, fade=False)


def badge(text: str, color: str, class_name: str = "", title: Optional[str] = None) -> dbc.Badge:
    """A small coloured label (``color``: info, warning, danger, success, secondary, light)."""
    return dbc.Badge(text, color=color, class_name=class_name, **({"title": title} if title else {}))


def card(header: Any, body: Any, class_name: str = "") -> dbc.Card:
    """A bordered block with a header row."""
    return dbc.Card([dbc.CardHeader(header), dbc.CardBody(body)], class_name=class_name)
