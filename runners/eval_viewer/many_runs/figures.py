"""The Runs tab's curves: one panel per quantity (the training loss and the learning rate over steps, then each
validation score over epochs), every run a line of its own colour in each, named once in the legend (a click on a
run's name hides it in every panel)."""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from runners.eval_viewer.figures.base import LOOK
from runners.eval_viewer.many_runs.data import RunCurves

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#393b79", "#637939"]
PANEL_PX = 240
GAP_PX = 70  # between rows of panels: the x-axis title above, the panel title below
TOP_PX = 30  # above the legend
LEGEND_ROW_PX, RUNS_PER_LEGEND_ROW = 22, 3
MAX_SCORES = 8  # validation scores drawn (the first of each run's, in order)


def curves_figure(curves: list[RunCurves]) -> go.Figure:
    """The runs' curves overlaid, a panel per quantity; a quantity no run recorded has no panel."""
    scores = list(dict.fromkeys(name for found in curves for name in found.scores))[:MAX_SCORES]
    panels = [(title, "step") for title, present in (
        ("training loss", any(len(found.losses) for found in curves)),
        ("learning rate", any(len(found.lr) for found in curves))) if present]
    panels += [(f"validation {name}", "epoch") for name in scores]
    if not panels:
        return go.Figure()
    rows = math.ceil(len(panels) / 2)
    legend_px = LEGEND_ROW_PX * math.ceil(len(curves) / RUNS_PER_LEGEND_ROW)
    height = PANEL_PX * rows + TOP_PX + legend_px
    fig = make_subplots(rows=rows, cols=2, subplot_titles=[title for title, _ in panels],
                        vertical_spacing=GAP_PX / height if rows > 1 else 0, horizontal_spacing=0.1)
    for order, found in enumerate(curves):
        colour, name = COLOURS[order % len(COLOURS)], found.run.name
        lines = {"training loss": (found.loss_steps, found.losses), "learning rate": (found.lr_steps, found.lr),
                 **{f"validation {s}": (found.epochs, found.scores.get(s, [])) for s in scores}}
        for place, (title, axis) in enumerate(panels):
            x, y = lines[title]
            if not len(y):
                continue
            fig.add_trace(go.Scatter(x=list(x), y=list(y), mode="lines" if axis == "step" else "lines+markers",
                                     name=name, legendgroup=name, showlegend=not any(
                                         t.legendgroup == name for t in fig.data),
                                     line={"color": colour, "width": 1.5},
                                     hovertemplate=f"{name}<br>{axis} %{{x}}: %{{y:.4g}}<extra>{title}</extra>"),
                          row=place // 2 + 1, col=place % 2 + 1)
            fig.update_xaxes(title_text=axis, title_standoff=2, row=place // 2 + 1, col=place % 2 + 1)
    fig.update_layout(template=LOOK, height=height, margin={"l": 50, "r": 20, "t": TOP_PX + legend_px, "b": 40},
                      legend={"orientation": "h", "yref": "container", "y": 1, "yanchor": "top", "x": 0},
                      hovermode="closest")
    fig.update_annotations(font={"size": 13})
    return fig
