"""Figures of a ``MaskDebugger`` output: masks over the input, the datapoint's IoU, and IoU calibration over an epoch.

The overlay is one plotly figure with its controls inside it, so it works the same in the viewer and in the HTML
export: the legend toggles each layer (label mask, predicted mask, false positives, false negatives, the predicted
probability, the prompt point), the buttons pick common views, and the slider sets the layers' opacity.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import plotly.graph_objects as go

from debuggers.outputs import IGNORED
from runners.eval_viewer.figures.base import (
    AXIS_TITLES,
    VIRIDIS,
    Figures,
    display_image,
    finish,
    finished,
    image_source,
    title_number,
)
from runners.eval_viewer.figures.context import DrawContext

MAX_FRAMES = 8  # panels of a clip's masks drawn side by side
# Pixels a side of a drawn mask: MaskDebugger keeps 256 by default; a page may hold more (a crafted 8000 x 8000 took
# 1.9 GB to draw), which is strided down to this first.
MAX_DRAWN_SIDE = 512
HEIGHT, TOP, BOTTOM = 560, 115, 130  # the overlay's pixels: the title and the buttons above, legend and slider below
BUTTONS_PX = 62  # from the top of the figure to the bottom of the buttons (the panel titles come after)
OPACITY = 0.5
PANEL_SPACING = 0.02  # between a clip's panels, in shares of the figure's width
PANEL_AXIS = {"showticklabels": False, "showgrid": False, "zeroline": False, "constrain": "domain"}
CALIBRATION_BINS = 10
# (name, colour): the layers over the input, in drawing order
LAYERS = (("label mask", "#2ca02c"), ("predicted mask", "#9467bd"), ("false positive", "#e41a1c"),
          ("false negative", "#ffbf00"), ("wrong class", "#ff7f0e"))
PROBABILITY = "predicted probability"
PROMPT = "prompt point"
VIEWS = {  # button -> layers shown (the others stay in the legend, one click away)
    "errors": ("false positive", "false negative", "wrong class", PROMPT),
    "label": ("label mask", PROMPT),
    "prediction": ("predicted mask", PROMPT),
    "label and prediction": ("label mask", "predicted mask", PROMPT),
    "probability": (PROBABILITY, PROMPT),
}


def mask_figures(output: dict[str, Any], context: DrawContext) -> Figures:
    """The overlay of the masks over the context's image (or each of a clip's frames), the datapoint's IoU (true,
    and predicted by the model where it predicts one), and, with the context's calibration pairs (the epoch's
    ``predicted_iou`` against ``iou``), where this datapoint lies among the others."""
    figures = [mask_overlay_figure(output, context.image, context.frames), iou_figure(output)]
    pair = (context.calibration or {}).get("iou")
    if pair is not None and len(pair.get("true", ())):
        this = (output.get("predicted_iou"), output.get("iou")) if output.get("predicted_iou") is not None else None
        figures.append(calibration_figure(pair["true"], pair["predicted"], pair.get("idx"), this))
    return figures


# --------------------------------------------------------------- the overlay
def error_layers(label_mask: np.ndarray, predicted_mask: np.ndarray) -> dict[str, np.ndarray]:
    """Each layer's pixels: the label and predicted masks (foreground: any class but 0), false positives (predicted
    where the label has background), false negatives (labelled, predicted background) and, for class maps,
    pixels of the wrong class; pixels the label ignores (255) are in none of them."""
    counted = label_mask != IGNORED
    labelled, predicted = (label_mask > 0) & counted, (predicted_mask > 0) & counted
    return {"label mask": labelled, "predicted mask": predicted, "false positive": predicted & ~labelled,
            "false negative": labelled & ~predicted,
            "wrong class": labelled & predicted & (label_mask != predicted_mask)}


def mask_overlay_figure(output: dict[str, Any], image: Optional[np.ndarray] = None,
                        frames: Optional[np.ndarray] = None) -> go.Figure:
    """The masks over the input, one panel per mask (a clip's frames); legend, buttons and an opacity slider. Built
    as plain dicts in one step (``plain_figure``): through plotly's subplots and updates it cost most of a click."""
    shown = min(len(output["label_mask"]), MAX_FRAMES)
    label_masks = np.asarray(output["label_mask"])[:shown]
    step = max(1, math.ceil(max(label_masks.shape[-2:], default=1) / MAX_DRAWN_SIDE))
    label_masks = label_masks[..., ::step, ::step]
    predicted_masks = np.asarray(output["predicted_mask"])[:shown, ..., ::step, ::step]
    probability = np.asarray(output["probability"])[:shown, ..., ::step, ::step].astype(np.float32) \
        if output.get("probability") is not None else np.zeros(label_masks.shape, dtype=np.float32)
    points = np.asarray(output["point"], dtype=np.float64).reshape(-1, 2) if output.get("point") is not None \
        else np.zeros((0, 2))
    data: list[dict[str, Any]] = []
    layout: dict[str, Any] = {"annotations": []}
    width = (1 - PANEL_SPACING * (shown - 1)) / shown
    for s in range(shown):
        axis = "" if s == 0 else str(s + 1)
        on = {"xaxis": f"x{axis}", "yaxis": f"y{axis}"}
        left = s * (width + PANEL_SPACING)
        layout[f"xaxis{axis}"] = {**PANEL_AXIS, "domain": [left, left + width], "anchor": f"y{axis}",
                                  "scaleanchor": f"y{axis}"}
        layout[f"yaxis{axis}"] = {**PANEL_AXIS, "domain": [0, 1], "anchor": f"x{axis}", "autorange": "reversed"}
        if shown > 1:
            layout["annotations"].append({"text": _panel_title(output, s), "x": left + width / 2, "y": 1.0,
                                          "xref": "paper", "yref": "paper", "xanchor": "center",
                                          "yanchor": "bottom", "showarrow": False, "font": {"size": 16}})
        background = _background(frames[s] if frames is not None and s < len(frames) else image,
                                 label_masks[s].shape)
        data.append({**image_source(background), "hoverinfo": "skip", "name": "input", **on})
        layers = error_layers(label_masks[s], predicted_masks[s])
        for name, colour in LAYERS:
            if name == "wrong class" and int(output.get("num_classes", 1)) < 2:
                continue
            data.append({**_mask_trace(layers[name], name, colour, first=s == 0), **on})
        data.append({"type": "heatmap", "z": probability[s], "zmin": 0, "zmax": 1, "colorscale": VIRIDIS,
                     "opacity": OPACITY, "name": PROBABILITY, "legendgroup": PROBABILITY, "showlegend": s == 0,
                     "showscale": False, "hovertemplate": "probability %{z:.2f}<extra></extra>", **on})
        if len(points) and s == 0:  # the prompt is given on the first frame
            at = points / (int(output.get("mask_step", 1)) * step) - 0.5  # a panel pixel is centred on its index
            data.append({"type": "scatter", "x": at[:, 0], "y": at[:, 1], "mode": "markers", "name": PROMPT,
                         "legendgroup": PROMPT, "marker": {"symbol": "star", "size": 14, "color": "white",
                                                           "line": {"color": "black", "width": 1.5}},
                         "customdata": points,
                         "hovertemplate": "prompt (%{customdata[0]:.1f}, %{customdata[1]:.1f})<extra></extra>", **on})
    for trace in data:
        if trace["name"] != "input":
            trace["visible"] = True if trace["name"] in VIEWS["errors"] else "legendonly"
    overlays = [i for i, trace in enumerate(data) if trace["type"] == "heatmap"]
    layout.update(updatemenus=[_view_buttons([trace["name"] for trace in data])], sliders=[_opacity_slider(overlays)],
                  legend={"orientation": "h", "y": -0.02, "yanchor": "top", "x": 0, "font": {"size": 11}},
                  title={"y": 1 - 8 / HEIGHT, "yanchor": "top"})  # at the very top, above the buttons
    iou = title_number(output.get("iou"))
    predicted = f", predicted {title_number(output.get('predicted_iou'))}" if output.get("predicted_iou") is not None \
        else ""
    return finished(data, layout, f"masks over the input: IoU {iou}{predicted}", HEIGHT,
                    {"t": TOP, "b": BOTTOM, "l": 10, "r": 10})


def _background(image: Optional[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """The input as (H, W, 3) uint8 at the masks' size (a grey canvas without one)."""
    if image is None:
        return np.full((*shape, 3), 128, dtype=np.uint8)
    picture = display_image(image)
    if picture.shape[:2] != tuple(shape):
        rows = np.minimum((np.arange(shape[0]) * picture.shape[0] / shape[0]).astype(int), picture.shape[0] - 1)
        cols = np.minimum((np.arange(shape[1]) * picture.shape[1] / shape[1]).astype(int), picture.shape[1] - 1)
        picture = picture[rows[:, None], cols[None, :]]
    return picture


def _mask_trace(mask: np.ndarray, name: str, colour: str, first: bool) -> dict[str, Any]:
    return {"type": "heatmap", "z": np.where(mask, np.float32(1), np.float32(np.nan)), "zmin": 0, "zmax": 1,
            "colorscale": [[0, colour], [1, colour]], "showscale": False, "opacity": OPACITY, "name": name,
            "legendgroup": name, "showlegend": first, "hoverongaps": False,
            "hovertemplate": f"{name}<extra></extra>"}


def _view_buttons(names: list[str]) -> dict[str, Any]:
    buttons = [{"label": view, "method": "restyle", "args": [{"visible": [
        True if name == "input" or name in layers else "legendonly" for name in names]}]}
        for view, layers in VIEWS.items()]
    above = (TOP - BUTTONS_PX) / (HEIGHT - TOP - BOTTOM)  # in heights of the plot area, above its top
    return {"type": "buttons", "direction": "right", "buttons": buttons, "x": 0, "y": 1 + above, "xanchor": "left",
            "yanchor": "bottom", "pad": {"r": 4, "t": 0}, "font": {"size": 11}, "showactive": True}


def _opacity_slider(overlays: list[int]) -> dict[str, Any]:
    levels = [round(0.1 * step, 1) for step in range(1, 11)]
    steps = [{"label": f"{level:.1f}", "method": "restyle", "args": [{"opacity": level}, overlays]} for level in levels]
    return {"active": levels.index(OPACITY), "steps": steps, "len": 0.6, "x": 0.2, "y": -0.12, "yanchor": "top",
            "pad": {"t": 4},
            "currentvalue": {"prefix": "opacity ", "font": {"size": 11}}, "font": {"size": 9}}


def _panel_title(output: dict[str, Any], frame: int) -> str:
    ious = np.asarray(output.get("mask_iou", []), dtype=np.float64).reshape(-1)
    return f"frame {frame}: IoU {title_number(ious[frame])}" if frame < len(ious) else f"frame {frame}"


# ------------------------------------------------------------------ the IoU
def iou_figure(output: dict[str, Any]) -> go.Figure:
    """The datapoint's IoU and Dice, and the IoU the model predicted, per mask (a clip's frames) where several."""
    true = np.asarray(output.get("mask_iou", [output.get("iou")]), dtype=np.float64).reshape(-1)
    predicted = output.get("mask_predicted_iou")
    labels = [f"frame {s}" for s in range(len(true))] if len(true) > 1 else ["mask"]
    fig = go.Figure(go.Bar(x=labels, y=true, name="IoU (true)", marker_color="#4c78a8"))
    if predicted is not None:
        fig.add_trace(go.Bar(x=labels, y=np.asarray(predicted, dtype=np.float64).reshape(-1),
                             name="IoU predicted by the model", marker_color="#f58518"))
    fig.update_yaxes(range=[0, 1.05], title_text="IoU")
    fig.update_layout(barmode="group", legend={"orientation": "h", "y": -0.2})
    title = f"IoU {title_number(output.get('iou'))}, Dice {title_number(output.get('dice'))}"
    if output.get("predicted_iou") is not None:
        title += f"; the model predicted IoU {title_number(output.get('predicted_iou'))}"
    return finish(fig, title, 300, {**AXIS_TITLES, "b": 70})


def calibration_figure(true: np.ndarray, predicted: np.ndarray, idx: Optional[np.ndarray] = None,
                       this: Optional[tuple[float, float]] = None, chosen: Optional[list[int]] = None) -> go.Figure:
    """Predicted IoU against true IoU over the epoch (one dot per datapoint, ``idx`` on hover), the diagonal of a
    calibrated model, the mean true IoU per bin of predicted IoU, and ``this`` datapoint's (predicted, true) as a
    star, or the ``chosen`` idx as stars (an export's datapoints: the figure drawn once for all of them)."""
    true, predicted = np.asarray(true, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    usable = np.isfinite(true) & np.isfinite(predicted)
    shown = np.asarray(idx)[usable] if idx is not None else None
    data = [{"type": "scatter", "x": predicted[usable].astype(np.float32), "y": true[usable].astype(np.float32),
             "mode": "markers", "name": "datapoints", "marker": {"size": 5, "color": "#9d9d9d", "opacity": 0.6},
             **({"customdata": shown.astype(np.int32),
                 "hovertemplate": "idx %{customdata}: predicted %{x:.2f}, true %{y:.2f}<extra></extra>"}
                if shown is not None else {"hovertemplate": "predicted %{x:.2f}, true %{y:.2f}<extra></extra>"})},
            {"type": "scatter", "x": [0, 1], "y": [0, 1], "mode": "lines", "name": "calibrated",
             "line": {"dash": "dash", "color": "#444"}, "hoverinfo": "skip"}]
    centres, means = calibration_curve(true[usable], predicted[usable])
    data.append({"type": "scatter", "x": centres, "y": means, "mode": "lines+markers", "name": "mean true IoU per bin",
                 "line": {"color": "#4c78a8"}})
    star = {"type": "scatter", "mode": "markers", "marker": {"symbol": "star", "size": 16, "color": "#e41a1c"}}
    if this is not None and all(value is not None and math.isfinite(float(value)) for value in this):
        data.append({**star, "x": [float(this[0])], "y": [float(this[1])], "name": "this datapoint"})
    if chosen is not None and shown is not None:
        marked = np.isin(shown, chosen)
        data.append({**star, "x": predicted[usable][marked], "y": true[usable][marked],
                     "name": "this report's datapoints", "customdata": shown[marked],
                     "hovertemplate": "idx %{customdata}<extra></extra>"})
    layout = {"xaxis": {"range": [-0.02, 1.02], "title": {"text": "IoU predicted by the model"}},
              "yaxis": {"range": [-0.02, 1.02], "title": {"text": "true IoU"}},
              "legend": {"orientation": "h", "y": -0.25}}
    error = float(np.mean(np.abs(predicted[usable] - true[usable]))) if usable.any() else math.nan
    return finished(data, layout, f"IoU calibration over the epoch: mean |predicted - true| {title_number(error)} "
                    f"({int(usable.sum())} datapoints)", 380, {**AXIS_TITLES, "b": 95})


def calibration_curve(true: np.ndarray, predicted: np.ndarray,
                      bins: int = CALIBRATION_BINS) -> tuple[np.ndarray, np.ndarray]:
    """Centres of the bins of predicted IoU that hold datapoints, and the mean true IoU in each."""
    which = np.clip((predicted * bins).astype(int), 0, bins - 1)
    counts = np.bincount(which, minlength=bins)
    sums = np.bincount(which, weights=true, minlength=bins)
    held = counts > 0
    return (np.arange(bins)[held] + 0.5) / bins, sums[held] / counts[held]
