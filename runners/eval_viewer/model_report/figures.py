"""Figures of a run's model report: totals, the layers, where parameters and FLOPs go, every module's shapes, the
first conv layers' filters."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from runners.eval_viewer.figures.base import MAX_PANELS, Figures, finish, image_axes, maps_figure, table_figure, tiled


def model_report_figures(report: dict[str, Any]) -> Figures:
    """The model report: totals (and where a failing forward stopped), a per-layer table with output shapes, where
    parameters and FLOPs go, every module's input and output shapes, and the first conv layers' filters."""
    params = report.get("parameters", {})
    summary = [("model", report.get("model")), ("parameters", params.get("total")),
               ("trainable", params.get("trainable")), ("frozen", params.get("frozen")),
               (f"FLOPs of one forward (batch {report.get('batch_size')})", report.get("total_flops"))]
    if report.get("flops_error"):
        summary.append(("FLOPs not counted", report["flops_error"]))
    failed = report.get("failed_module")
    if isinstance(failed, dict):
        summary.append(("the forward failed inside", f"{failed.get('name')} ({failed.get('type')}: "
                        f"{failed.get('module')}), inputs {failed.get('input_shapes')}"))
    layers = report.get("layers", [])
    columns = ("name", "type", "parameters", "trainable", "flops", "output_shape", "output_dtype")
    table = go.Figure(go.Table(
        header={"values": ["layer", "type", "parameters", "trainable", "FLOPs", "output shape", "dtype"],
                "align": "left"},
        cells={"values": [[_cell(layer.get(k)) for layer in layers] for k in columns], "align": "left"}))
    bars = make_subplots(rows=1, cols=2, subplot_titles=["parameters per layer", "FLOPs per layer"])
    names = [layer.get("name") for layer in layers]
    bars.add_trace(go.Bar(x=names, y=[layer.get("parameters") for layer in layers], name="parameters"), 1, 1)
    bars.add_trace(go.Bar(x=names, y=[layer.get("flops") for layer in layers], name="FLOPs"), 1, 2)
    bars.update_layout(showlegend=False)
    bars.update_xaxes(automargin=True)  # layer names
    figures = [table_figure(summary, f"model report: {report.get('model')}", ("", "")),
               finish(table, "layers", min(120 + 26 * len(layers), 700)),
               finish(bars, "parameters and FLOPs", 360, {"autoexpand": True})]
    shapes = report.get("module_shapes")
    if isinstance(shapes, list) and shapes:
        figures.append(module_shapes_figure([entry for entry in shapes if isinstance(entry, dict)]))
    return figures + conv_filter_figures(report)


def module_shapes_figure(modules: list[dict[str, Any]]) -> go.Figure:
    """Every module of the report's forward pass, in the order they finished: input and output shapes, dtypes."""
    columns = ("name", "type", "input_shapes", "output_shapes", "output_dtypes", "calls")
    table = go.Figure(go.Table(
        header={"values": ["module", "type", "input shapes", "output shapes", "dtypes", "calls"], "align": "left"},
        cells={"values": [[_cell(module.get(k)) for module in modules] for k in columns], "align": "left"}))
    return finish(table, "input and output shapes of every module, in the order they ran",
                  min(120 + 26 * len(modules), 700))


def _cell(value: Any) -> Any:
    """A table cell: numbers as they are, lists (shapes) as text, nothing for None."""
    return "" if value is None else str(value) if isinstance(value, (list, tuple, dict)) else value


def conv_filter_figures(report: dict[str, Any]) -> Figures:
    """Each reported conv layer's filters as a 4-column grid, as the PyTorch chapter's ``visualize_conv_filters``
    draws them: RGB pictures for a layer reading 3 channels (min-max scaled over the layer), else input channel
    0 as heatmaps on one colour scale. An entry that is not such filters is named, not drawn."""
    figures = []
    for entry in report.get("conv_filters") or []:
        layer = entry.get("layer") if isinstance(entry, dict) else None
        try:
            filters = np.asarray(entry["filters"], dtype=np.float64)[:MAX_PANELS]
            rgb = bool(entry.get("rgb"))
            if filters.ndim != (4 if rgb else 3) or (rgb and filters.shape[1] != 3) or not filters.size:
                raise ValueError(f"filters of shape {filters.shape}")
        except (KeyError, TypeError, ValueError) as exc:
            figures.append(table_figure([("layer", layer), ("cannot be drawn", str(exc))], "conv filters"))
            continue
        title = (f"{layer} filters {entry.get('weight_shape')} at {report.get('conv_filters_at', '?')}"
                 + (" (RGB)" if rgb else " (input channel 0)"))
        titles = [f"filter {i}" for i in range(len(filters))]
        figures.append(_rgb_grid(filters, titles, title) if rgb
                       else maps_figure(list(filters), titles, title, "weight"))
    return figures


def _rgb_grid(filters: np.ndarray, titles: list[str], title: str) -> go.Figure:
    """(n, 3, kh, kw) filters tiled as one RGB picture, scaled together to [0, 255], white between them."""
    low, high = np.nanmin(filters), np.nanmax(filters)
    scaled = (filters - low) / (high - low) if high > low else np.zeros_like(filters)
    channels = [tiled(list(scaled[:, c]), titles)[0] for c in range(3)]
    _, tiles, labels = tiled(list(scaled[:, 0]), titles)
    picture = np.nan_to_num(np.stack(channels, axis=-1), nan=1.0)
    fig = go.Figure(go.Image(z=(picture * 255).round().astype(np.uint8)))
    fig.update_layout(annotations=labels, meta={"tiles": tiles})
    fig = image_axes(fig)
    return finish(fig, title, height=120 + 170 * math.ceil(len(filters) / 4))
