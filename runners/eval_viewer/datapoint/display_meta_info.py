"""The Meta info section: one row per key (idx, class name, how the datapoint was made)."""

from __future__ import annotations

from typing import Any

from dash import html

from runners.eval_viewer.figures.components import key_value_table


def display_meta_info(meta_info: dict[str, Any]) -> html.Div:
    return html.Div(key_value_table(meta_info))
