"""Figures of where things break: the modules whose output held NaN/Inf first, and the gradient flow through the
layers (missing, zero or frozen gradients coloured)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import plotly.graph_objects as go

from runners.eval_viewer.figures.base import AXIS_TITLES, Figures, finish, format_value, table_figure, title_number
from runners.eval_viewer.figures.context import DrawContext

FLAG_COLOURS = {"ok": "#4c78a8", "zero": "#f58518", "missing": "#e45756", "frozen": "#9d9d9d"}


def nan_origin_figures(output: dict[str, Any], context: DrawContext) -> Figures:
    """The modules whose output held NaN/Inf, in execution order, the first one highlighted."""
    bad = list(output.get("bad_modules") or [])
    if not bad:
        return [table_figure([("result", f"no NaN or Inf in any module output "
                               f"({output.get('modules_checked', '?')} module calls checked)")],
                             "NaN/Inf origin")]
    origin = f"first NaN/Inf ({output.get('module_type')}), input range " \
             f"[{format_value(output.get('input_min'))}, {format_value(output.get('input_max'))}]"
    rows = [(name, origin if i == 0 else "NaN/Inf in output") for i, name in enumerate(bad)]
    fill = ["#f8d7da"] + ["white"] * (len(bad) - 1)
    return [table_figure(rows, f"NaN/Inf origin: {bad[0]}", ("module (execution order)", "finding"), fill)]


def gradient_flow_figures(output: dict[str, Any], context: DrawContext) -> Figures:
    """Gradient norm per layer (log scale), layers with missing, zero or frozen gradients coloured."""
    layers = list(output["layers"])
    norms = np.asarray(output["grad_norms"], dtype=np.float64)
    flags = [_flag(output, i) for i in range(len(layers))]
    positive = norms[norms > 0]
    floor = positive.min() / 10 if positive.size else 1e-12  # flagged layers get a stub bar on the log axis
    fig = go.Figure()
    for flag, colour in FLAG_COLOURS.items():
        rows = [i for i, f in enumerate(flags) if f == flag]
        if rows:
            fig.add_trace(go.Bar(x=[layers[i] for i in rows], y=[max(norms[i], floor) for i in rows], name=flag,
                                 marker_color=colour, customdata=norms[rows],
                                 hovertemplate="%{x}: %{customdata:.3g}<extra>" + flag + "</extra>"))
    fig.update_xaxes(categoryorder="array", categoryarray=layers, automargin=True)  # layer names: room to fit
    drawn = np.maximum(norms, floor)
    ticks = log_ticks(float(drawn.min()), float(drawn.max())) if drawn.size else []
    fig.update_yaxes(type="log", title_text="gradient norm", tickvals=ticks, ticktext=[f"{t:g}" for t in ticks],
                     automargin=True)
    loss = output.get("loss")
    return [finish(fig, "gradient flow" + (f" (loss {title_number(loss)})" if loss is not None else ""), 340,
                   {**AXIS_TITLES, "autoexpand": True})]  # layer names and the legend: margins fit them


def log_ticks(low: float, high: float) -> list[float]:
    """Labelled ticks of a log axis from ``low`` to ``high``: 1, 2 and 5 times each power of ten within a range
    of up to two decades, powers of ten (at most 8 of them) beyond: never every minor tick."""
    low, high = max(low, 1e-300), max(high, low)
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    steps = (1,) if last - first > 2 else (1, 2, 5)
    stride = max(1, math.ceil((last - first + 1) / 8))
    ticks = [m * 10.0 ** e for e in range(first, last + 1, stride) for m in steps]
    inside = [t for t in ticks if low <= t <= high]
    return inside if len(inside) >= 2 else sorted({float(f"{low:.2g}"), float(f"{high:.2g}")})


def _flag(output: dict[str, Any], i: int) -> str:
    for flag in ("frozen", "missing", "zero"):
        values = output.get(flag)
        if values is not None and bool(np.asarray(values)[i]):
            return flag
    return "ok"
