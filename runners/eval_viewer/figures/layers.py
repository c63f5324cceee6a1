"""Figures of what a layer gives: its feature map (the strongest channels), its activation statistics (a table, the
histogram, the channel means) and its pooled output."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from runners.eval_viewer.figures.arrays import array_figures
from runners.eval_viewer.figures.base import (
    AXIS_TITLES,
    MAX_PANELS,
    Figures,
    finish,
    maps_figure,
    table_figure,
    title_number,
)
from runners.eval_viewer.figures.context import DrawContext


def feature_map_figures(output: dict[str, Any], context: DrawContext) -> Figures:
    """The strongest channels (highest mean activation) of one datapoint's feature map, as a mosaic; or the
    channel indices ``context.channels``, in that order (the same channels in every column of a comparison)."""
    channels = context.channels
    fmap = np.asarray(output["feature_map"], dtype=np.float64)
    indices = np.asarray(output.get("channel_indices", np.arange(fmap.shape[0])))
    if channels is None:
        order = list(np.argsort(-np.nanmean(fmap, axis=(1, 2)), kind="stable")[:MAX_PANELS])
        chosen = f"{len(order)} strongest channels"
    else:
        position = {int(index): i for i, index in enumerate(indices)}
        order = [position[channel] for channel in channels if channel in position]
        chosen = f"{len(order)} channels, the same in every column"
    stats = output.get("stats", {})
    title = f"{output.get('layer_name', '')} feature map {output.get('shape', list(fmap.shape))}: " \
            f"{chosen} (mean {title_number(stats.get('mean', np.nan))})"
    return [maps_figure([fmap[i] for i in order], [f"ch {int(indices[i])}" for i in order], title, "activation")]


def statistics_figures(output: dict[str, Any], context: DrawContext) -> Figures:
    """The scalar statistics as a table, the activation histogram, the channel means."""
    skip = {"kind", "layer_name", "histogram", "histogram_edges", "sample_values", "channel_means", "channel_stds"}
    rows = [(key, value) for key, value in output.items() if key not in skip]
    figures = [table_figure(rows, f"{output.get('layer_name', '')} activation statistics", ("statistic", "value"))]
    if "histogram" in output:
        figures.append(histogram_figure(output["histogram"], output["histogram_edges"],
                                        f"{output.get('layer_name', '')} activation histogram"))
    if "channel_means" in output:
        means = np.asarray(output["channel_means"], dtype=np.float64)
        stds = np.asarray(output.get("channel_stds", np.zeros_like(means)), dtype=np.float64)
        fig = go.Figure(go.Bar(x=np.arange(len(means)), y=means, error_y={"type": "data", "array": stds}))
        fig.update_xaxes(title_text="channel")
        figures.append(finish(fig, f"{output.get('layer_name', '')} channel means (± std)", 280, AXIS_TITLES))
    return figures


def histogram_figure(counts: np.ndarray, edges: np.ndarray, title: str) -> go.Figure:
    """A precomputed histogram: one bar per bin, spanning its edges."""
    edges = np.asarray(edges, dtype=np.float64)
    fig = go.Figure(go.Bar(x=(edges[:-1] + edges[1:]) / 2, y=np.asarray(counts), width=np.diff(edges),
                           marker_line_width=0))
    fig.update_xaxes(title_text="activation")
    fig.update_yaxes(title_text="count")
    return finish(fig, title, 280, AXIS_TITLES)


def layer_output_figures(output: dict[str, Any], context: DrawContext) -> Figures:
    """The pooled layer output: a grid of channels for maps, a heatmap for matrices, bars for vectors."""
    title = f"{output.get('layer_name', '')} output {output.get('original_shape', '')}, " \
            f"pooled ×{output.get('downsample_factor', 1)}"
    return array_figures(np.asarray(output["output"]), title, "activation")
