"""Figures of a run's training monitor file (``run_dir.training_log.TrainingLog``): the loss and the
learning rate over steps, per-layer heatmaps of the gradient norm and the update/weight ratio over steps, and
a layer's weight and gradient histograms per epoch.

Spikes (``analysis.training_spikes``) are marked: the loss's with red triangles, the total gradient norm's with
dotted orange lines on the gradient heatmap; the first non-finite step with a dashed red line on every figure
over steps. Long runs are thinned for drawing: at most ``MAX_POINTS`` losses
(each bucket of steps keeps its lowest and highest loss, so a spike is never thinned away), at most
``MAX_CELLS`` heatmap cells (evenly spaced steps; one per layer for a model of more layers) and the learning
rates of ``MAX_LR_GROUPS`` parameter groups.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analysis.training_spikes import spikes
from run_dir.training_log import GRAD_FROZEN, GRAD_MISSING, GRAD_OK, GRAD_STATES, GRAD_ZERO, TrainingLog
from runners.eval_viewer.figures.base import AXIS_TITLES, COLOUR_BAR_MARGIN, LOOK, MARGIN, title_number
from runners.eval_viewer.figures.gradients import FLAG_COLOURS

MAX_POINTS = 20_000
MAX_CELLS = 150_000  # of a heatmap (layers x steps): a few MB of JSON for the browser
MAX_LR_GROUPS = 8  # parameter groups whose learning rate is drawn
MAX_MARKED = 50  # spike lines drawn on a heatmap
SPIKE_COLOUR = "#ff7f0e"
LAYER_PX = 16  # a heatmap row
NONFINITE_COLOUR = "#d62728"
NOT_UPDATING = (GRAD_ZERO, GRAD_MISSING, GRAD_FROZEN)
TYPICAL_UPDATE_RATIO = 1e-3  # a common rule of thumb: updates near a thousandth of the weights


def loss_figure(log: TrainingLog) -> go.Figure:
    """Every step's loss, the learning rate of each parameter group (right axis), loss spikes and the steps
    whose loss is not finite (drawn at the top, since they have no height)."""
    steps, losses = thin_curve(log.loss_steps, log.losses.astype(np.float64))
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Scatter(x=steps, y=losses, mode="lines", name="loss", line={"width": 1}))
    spiked = spikes(losses)
    fig.add_trace(go.Scatter(x=steps[spiked], y=losses[spiked], mode="markers", name="loss spike",
                             marker={"symbol": "triangle-up", "size": 9, "color": NONFINITE_COLOUR}))
    bad = ~np.isfinite(losses)
    if bad.any():
        top = np.nanmax(np.where(bad, np.nan, losses)) if (~bad).any() else 1.0
        fig.add_trace(go.Scatter(x=steps[bad], y=np.full(int(bad.sum()), top), mode="markers", name="non-finite loss",
                                 marker={"symbol": "x", "size": 8, "color": NONFINITE_COLOUR},
                                 hovertemplate="step %{x}: loss is NaN/Inf<extra></extra>"))
    groups = log.lr.shape[1] if log.lr.ndim == 2 else 0
    for group in range(min(groups, MAX_LR_GROUPS)):
        fig.add_trace(go.Scatter(x=log.steps, y=log.lr[:, group], mode="lines", name=f"learning rate (group {group})",
                                 line={"dash": "dot", "width": 1}), secondary_y=True)
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text="loss", secondary_y=False)
    fig.update_yaxes(title_text="learning rate", secondary_y=True, showgrid=False)
    _mark_first_nonfinite(fig, log)
    shown = f" (the first {MAX_LR_GROUPS} of {groups} parameter groups)" if groups > MAX_LR_GROUPS else ""
    return _finish(fig, f"loss ({spiked.sum()} spike(s)) and learning rate{shown}", 360,
                   {**AXIS_TITLES, "r": 70, "autoexpand": True})


def norm_heatmap(log: TrainingLog, quantity: str) -> go.Figure:
    """log10 of ``grad_norm`` or ``update_ratio`` per layer (rows) over monitored steps (columns); a layer whose
    gradient is zero, missing or frozen at a step is a gap, and a non-finite norm a red cross."""
    rows = thin_rows(len(log.steps), max(1, MAX_CELLS // max(len(log.layers), 1)))
    values = getattr(log, quantity)[rows].astype(np.float64)
    states = log.grad_state[rows]
    steps = log.steps[rows]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where((states == GRAD_OK) & np.isfinite(values) & (values > 0), np.log10(values), np.nan)
    hover = np.vectorize(GRAD_STATES.get)(states) if states.size else states.astype(str)
    title = {"grad_norm": "gradient norm per layer (log10)",
             "update_ratio": f"update / weight ratio per layer (log10; {title_number(TYPICAL_UPDATE_RATIO)} is "
                             "typical)"}[quantity]
    if values.size and np.isnan(values).all():
        title += ": not recorded (update_ratio is False)" if quantity == "update_ratio" else ": none finite"
    fig = go.Figure(go.Heatmap(
        z=z.T, x=steps, y=log.layers, customdata=np.stack([values.T, hover.T], axis=-1) if values.size else None,
        colorscale="Viridis", colorbar={"title": {"text": "log10"}},
        hovertemplate="%{y}<br>step %{x}: %{customdata[0]:.3g} (%{customdata[1]})<extra></extra>"))
    bad = np.argwhere(~np.isfinite(values))
    if bad.size:
        fig.add_trace(go.Scatter(x=steps[bad[:, 0]], y=[log.layers[i] for i in bad[:, 1]], mode="markers",
                                 name="non-finite", marker={"symbol": "x", "color": NONFINITE_COLOUR, "size": 7},
                                 hovertemplate="%{y}<br>step %{x}: NaN/Inf<extra></extra>", showlegend=False))
    if quantity == "grad_norm":
        total = np.sqrt(np.nansum(np.where(np.isfinite(values), values, np.nan) ** 2, axis=1))
        spiked = steps[spikes(total)]
        for step in spiked[:MAX_MARKED]:
            fig.add_vline(x=int(step), line={"color": SPIKE_COLOUR, "width": 1, "dash": "dot"})
        title += f"; {len(spiked)} spike(s) of the total norm (dotted)" if len(spiked) else ""
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(autorange="reversed", type="category", automargin=True)  # room for the layer names
    _mark_first_nonfinite(fig, log)
    height = min(140 + LAYER_PX * len(log.layers), 900)
    return _finish(fig, title, height, {**AXIS_TITLES, "r": COLOUR_BAR_MARGIN, "autoexpand": True})


def histogram_figure(log: TrainingLog, layer: int) -> go.Figure:
    """The layer's weight histogram (left) and gradient histogram (right) at each epoch's end, one line per
    epoch (later epochs darker); an epoch whose values there are all NaN/Inf (or that has none: no gradient)
    is said in the panel."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=["weights", "gradients (the epoch's last step)"])
    count = len(log.histograms)
    missing: dict[int, list[str]] = {1: [], 2: []}
    for order, histograms in enumerate(sorted(log.histograms, key=lambda h: h.epoch)):
        shade = f"rgba(31, 119, 180, {0.25 + 0.75 * (order + 1) / count:.2f})"
        for col, (counts, bounds, nonfinite) in enumerate(
                ((histograms.weight_counts, histograms.weight_range, histograms.weight_nonfinite),
                 (histograms.grad_counts, histograms.grad_range, histograms.grad_nonfinite)), start=1):
            low, high = bounds[layer]
            if not (math.isfinite(low) and math.isfinite(high)):
                missing[col].append(f"epoch {histograms.epoch}: "
                                    + (f"all {nonfinite[layer]} values NaN/Inf" if nonfinite[layer] else "none"))
                continue
            edges = np.linspace(low, high, counts.shape[1] + 1)
            note = f" ({nonfinite[layer]} NaN/Inf left out)" if nonfinite[layer] else ""
            fig.add_trace(go.Scatter(x=(edges[:-1] + edges[1:]) / 2, y=counts[layer], mode="lines",
                                     line={"shape": "hvh", "color": shade}, name=f"epoch {histograms.epoch}",
                                     legendgroup=str(histograms.epoch), showlegend=col == 1,
                                     hovertemplate=f"epoch {histograms.epoch}: %{{y}} values near %{{x:.3g}}{note}"
                                                   "<extra></extra>"), 1, col)
    for col, notes in missing.items():
        if notes:
            fig.add_annotation(text="<br>".join(notes), xref=f"x{'' if col == 1 else col} domain",
                               yref=f"y{'' if col == 1 else col} domain", x=0.5, y=0.9, showarrow=False,
                               font={"color": NONFINITE_COLOUR})
    fig.update_yaxes(title_text="count", row=1, col=1)
    name = log.layers[layer] if 0 <= layer < len(log.layers) else "?"
    return _finish(fig, f"{name}: weights and gradients per epoch", 340, {**AXIS_TITLES, "autoexpand": True})


def thin_curve(steps: np.ndarray, values: np.ndarray, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_points`` of a curve: each bucket of consecutive steps keeps its lowest and highest value and
    its non-finite ones, in step order."""
    if len(steps) <= max_points:
        return steps, values
    size = math.ceil(len(steps) / (max_points // 2))
    padded = np.full(math.ceil(len(values) / size) * size, np.nan)
    padded[:len(values)] = np.where(np.isfinite(values), values, np.nan)
    buckets = padded.reshape(-1, size)
    start = np.arange(len(buckets)) * size
    with np.errstate(all="ignore"):
        full = ~np.isnan(buckets).all(axis=1)
        keep = [start[full] + np.nanargmin(buckets[full], axis=1), start[full] + np.nanargmax(buckets[full], axis=1)]
    chosen = np.unique(np.concatenate([*keep, np.flatnonzero(~np.isfinite(values))]))
    return steps[chosen], values[chosen]


def thin_rows(count: int, max_rows: int) -> np.ndarray:
    """Indices of at most ``max_rows`` evenly spaced rows, the last one included."""
    if count <= max_rows:
        return np.arange(count)
    return np.unique(np.linspace(0, count - 1, max_rows).round().astype(np.int64))


def states_table(log: TrainingLog) -> list[tuple[str, str, int, int]]:
    """(layer, state, first step, monitored steps) for each layer whose gradient did not update (zero, missing
    or frozen) at some monitored step, by its latest such state (non-finite gradients are the NaN report's)."""
    found = []
    for layer, name in enumerate(log.layers):
        column = log.grad_state[:, layer] if log.grad_state.size else np.zeros(0)
        off = np.flatnonzero(np.isin(column, NOT_UPDATING))
        if off.size:
            state = int(column[off[-1]])
            found.append((name, GRAD_STATES.get(state, "?"), int(log.steps[off[0]]), int(off.size)))
    return found


def state_colour(state: str) -> str:
    return FLAG_COLOURS.get(state, NONFINITE_COLOUR)


def _mark_first_nonfinite(fig: go.Figure, log: TrainingLog) -> None:
    step: Optional[int] = log.first_nonfinite_step
    if step is not None:
        fig.add_vline(x=step, line={"color": NONFINITE_COLOUR, "width": 2, "dash": "dash"},
                      annotation={"text": f"first non-finite step {step}", "font": {"color": NONFINITE_COLOUR}})


def _finish(fig: go.Figure, title: str, height: int, margin: dict) -> go.Figure:
    fig.update_layout(template=LOOK, title={"text": title, "font": {"size": 14}}, height=height,
                      margin={**MARGIN, **margin}, legend={"orientation": "h", "y": -0.25})
    return fig
