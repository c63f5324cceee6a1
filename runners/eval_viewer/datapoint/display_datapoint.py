"""``display_datapoint``: the sections Inputs, Labels, Meta info and, where debug outputs exist, Debug Outputs."""

from __future__ import annotations

from typing import Any

from dash import html

from runners.eval_viewer.datapoint.display_debug_outputs import display_debug_outputs
from runners.eval_viewer.datapoint.display_inputs import display_inputs
from runners.eval_viewer.datapoint.display_labels import datapoint_label_class, display_labels
from runners.eval_viewer.datapoint.display_meta_info import display_meta_info
from runners.eval_viewer.figures.context import DrawContext
from runners.eval_viewer.shared.elements import alert


def section(title: str, body: Any) -> html.Section:
    """A titled section; the class (``section-debug-outputs``) lets pages and tests find it."""
    slug = title.lower().replace(" ", "-")
    return html.Section([html.H4(title), body], className=f"datapoint-section section-{slug}")


def display_datapoint(datapoint: dict[str, Any]) -> html.Div:
    """Draw a datapoint from ``runners.eval_viewer.shared.datapoint.load_datapoint``.

    ``debug`` None means the epoch has no debug outputs: three sections. A
    ``dataset_error`` or ``debug_error`` replaces what could not be read with its message.
    """
    sections = [display_summary(datapoint)]
    if datapoint.get("debug") is not None or datapoint.get("debug_error"):
        sections.append(section("Debug Outputs", debug_body(datapoint)))
    return html.Div(sections, className="datapoint")


def display_summary(datapoint: dict[str, Any]) -> html.Div:
    """Inputs, Labels and Meta info side by side."""
    return html.Div([section("Inputs", _or_error(datapoint, "inputs", display_inputs)),
                     section("Labels", _or_error(datapoint, "labels", lambda labels: display_labels(
                         labels, datapoint_label_class(datapoint)))),
                     section("Meta info", _or_error(datapoint, "meta_info", display_meta_info))],
                    className="datapoint-summary")


def debug_body(datapoint: dict[str, Any]) -> html.Div:
    """The Debug Outputs of a datapoint, or the error that kept its page from being read."""
    if datapoint.get("debug_error"):
        return html.Div(alert(datapoint["debug_error"], color="danger", class_name="page-error"))
    if datapoint.get("debug_note"):
        return html.Div(alert(datapoint["debug_note"], color="secondary", class_name="debug-note"))
    return display_debug_outputs(datapoint["debug"], DrawContext.of(datapoint))


def _or_error(datapoint: dict[str, Any], key: str, display: Any) -> Any:
    if datapoint.get(key) is not None:
        return display(datapoint[key])
    error = datapoint.get("dataset_error")
    if error and key != "inputs":
        error = "not available: the dataset could not be rebuilt (see Inputs)"
    message = error or f"this datapoint has no {key.replace('_', ' ')}"
    return alert(message, color="warning", class_name="dataset-error")
