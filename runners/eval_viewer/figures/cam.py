"""Figures of Grad-CAM: the map over the input image, beside it the other class's (label and prediction), each titled
by its role and class name."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import plotly.graph_objects as go

from runners.eval_viewer.figures.base import (
    Figures,
    colour_bar,
    display_image,
    finish,
    image_axes,
    stretched_over,
    title_number,
)
from runners.eval_viewer.figures.context import DrawContext


def cam_figures(output: dict[str, Any], context: DrawContext) -> Figures:
    """The Grad-CAM heatmap over the input image when the context has it; beside it, where the label and the
    prediction differ, the cam of the other one (``other_target``), each titled by role and class name."""
    image, class_names = context.image, context.class_names
    panels = [(output["cam"], int(output.get("target_class", -1)), output.get("raw_max"))]
    other = output.get("other_target")
    if isinstance(other, dict):
        panels.append((other["cam"], int(other["target_class"]), other.get("raw_max")))
    if output.get("label_class") is not None and output.get("predicted_class") is not None:
        panels.sort(key=lambda panel: panel[1] != int(output["label_class"]))  # the label's cam first
    fig = go.Figure()
    picture = display_image(image) if image is not None else None
    annotations = []
    for i, (cam, target, _) in enumerate(panels):
        axes = {"xaxis": "x" if i == 0 else f"x{i + 1}", "yaxis": "y" if i == 0 else f"y{i + 1}"}
        cam = np.atleast_2d(np.asarray(cam, dtype=np.float64))  # a signal's or a sequence's cam: one row
        heat = {"zmin": 0.0, "zmax": 1.0, "colorscale": "Jet", "showscale": i == len(panels) - 1,
                "colorbar": colour_bar("share of max"), **axes}
        if picture is not None:
            fig.add_trace(go.Image(z=picture, hoverinfo="skip", **axes))
            heat.update(stretched_over(picture, cam))
        fig.add_trace(go.Heatmap(z=cam, hovertemplate="x %{x:.0f}, y %{y:.0f}: %{z:.2f}<extra></extra>", **heat))
        annotations.append({"text": cam_title(output, target, class_names),
                            "x": 0.5, "y": 1.0, "xref": f"{axes['xaxis']} domain", "yref": f"{axes['yaxis']} domain",
                            "yanchor": "bottom", "showarrow": False, "font": {"size": 12}})
    width = 1 / len(panels)
    for i in range(len(panels)):
        suffix = "" if i == 0 else str(i + 1)
        fig.layout[f"xaxis{suffix}"] = {"domain": [i * width + 0.02, (i + 1) * width - 0.02], "anchor": f"y{suffix}"}
        fig.layout[f"yaxis{suffix}"] = {"domain": [0, 0.92], "anchor": f"x{suffix}"}
    fig.update_layout(annotations=annotations)
    fig = image_axes(fig)
    return [finish(fig, f"Grad-CAM at {output.get('target_layer', '')} {cam_scale_note(panels)}", 380)]


def cam_scale_note(panels: list[tuple]) -> str:
    """What a cam's colours are: each map divided by its own maximum (the class's strongest positive evidence,
    given to 4 significant digits); a maximum of 0 is a map with no positive evidence for its class, drawn empty."""
    maxima = [raw_max for _, _, raw_max in panels if raw_max is not None]
    if not maxima:
        return ""
    shown = " / ".join("0: no positive evidence" if not raw_max else title_number(raw_max) for raw_max in maxima)
    return f"(each map as a share of its maximum, {shown})"


def cam_title(output: dict[str, Any], target: int, class_names: Optional[dict[int, str]] = None) -> str:
    """``'label: cat'``, ``'prediction: dog'``, ``'label and prediction: cat'``, ``'class 4: ring'`` (a target that is
    neither) or, where the run names no classes, ``'label: class 4'`` and ``'class 4'``."""
    roles = [role for role, key in (("label", "label_class"), ("prediction", "predicted_class"))
             if output.get(key) is not None and int(output[key]) == target]
    name = (class_names or {}).get(int(target))
    if not roles:
        return f"class {target}" + (f": {name}" if name is not None else "")
    return f"{' and '.join(roles)}: {name if name is not None else f'class {target}'}"
