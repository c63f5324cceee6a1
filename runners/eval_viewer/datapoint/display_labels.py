"""The Labels section and the label/prediction badges: class indices with the class names the run's epoch
table gives (``ring (4)``), dense labels (masks, maps) as images."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
from dash import html

from runners.eval_viewer.figures.components import value_component
from runners.eval_viewer.figures.values import array_or_none
from runners.eval_viewer.shared.elements import badge
from runners.eval_viewer.shared.table import class_text


def display_labels(labels: dict[str, Any], label_class: Optional[tuple[int, str]] = None) -> html.Div:
    """Every label; ``label_class`` (the epoch table's label: ``(4, 'ring (4)')``) names the one class-index
    label that equals it."""
    class_keys = [key for key, value in labels.items() if _class_index(value) is not None]
    rows = []
    for name, value in labels.items():
        if label_class is not None and class_keys == [name] and _class_index(value) == label_class[0]:
            rows.append(html.Div([html.Strong(f"{name}: "), html.Span(label_class[1], className="label-class")]))
        else:
            rows.append(value_component(name, value))
    return html.Div(rows, className="value-list")


def class_badges(datapoint: dict[str, Any]) -> list[html.Span]:
    """``label ring (4)`` and ``prediction circle (0)`` badges (red when they differ), from the epoch table."""
    classes, names = datapoint.get("classes") or {}, datapoint.get("class_names")
    wrong = "label" in classes and "prediction" in classes and classes["label"] != classes["prediction"]
    return [badge(f"{role} {class_text(classes[role], names)}", color="danger" if wrong else "success",
                  class_name=f"class-badge badge-{role}") for role in ("label", "prediction") if role in classes]


def datapoint_label_class(datapoint: dict[str, Any]) -> Optional[tuple[int, str]]:
    """The label's class id and text for the Labels section, where the epoch table gives it."""
    label = (datapoint.get("classes") or {}).get("label")
    return (int(label), class_text(label, datapoint.get("class_names"))) if label is not None else None


def _class_index(value: Any) -> Optional[int]:
    array = array_or_none(value)
    if array is None and isinstance(value, int) and not isinstance(value, bool):
        return value
    if array is not None and array.size == 1 and array.dtype.kind in "iu":
        return int(np.asarray(array).reshape(-1)[0])
    return None
