"""Figures of maps drawn as pictures: one SVG ``<img>`` holding the maps as PNGs, their captions and colour bar.

A map a researcher looks at rather than reads value by value (feature-map channels, a layer's pooled maps,
Grad-CAM and patch attention over the input image; ``figures.is_picture``) costs plotly.js 30-120 ms
to draw on every click, and its image travels as a JSON array of pixels. As one image it costs the browser the
decoding of a few kB, and the page's renderer one component (it pays per component: a ``<figure>`` per map
cost more than plotly did). The figure stays the description of what is drawn: the picture is made from its
traces (their colour scale, range and colour bar's title, the heatmap's place over the image and its opacity), so the
same figure is a plotly graph, hover values included, in the HTML export.

A figure drawn in a narrow column (a comparison's, ``compare_figures``) says so in ``layout.meta['frame']``:
``{'width': units, 'panels': n}``. The page scales a picture to its column, so its SVG then spans ``width`` units,
the column's width in pixels, and its text is read at its size; its colour bar lies under the maps (beside them it
would take half the column), or its room is left blank where the row shows the bar once (``showscale`` False), and
side-by-side panels share the width ``n`` ways (the most panels any picture of the row has): every picture of a row
has one size, so a map is compared with the map beside it at the same scale.
"""

from __future__ import annotations

import base64
from html import escape
from typing import Any, Optional

import numpy as np
import plotly.colors
import plotly.graph_objects as go

from runners.eval_viewer.figures.base import colour_unit, png_data_uri

WIDTH = 480  # SVG units the maps span; the page scales the picture to its column
PANEL = 240  # width of one panel (a Grad-CAM) in SVG units
PANEL_GAP = 12  # between side-by-side panels
CAPTION = 16  # room above a map for its caption
BAR = 84  # room on the right for the colour bar, its labels and its title (the unit)
BAR_BELOW = 40  # room under the maps for a colour bar laid under them (a narrow column): bar, labels, unit
BOTTOM = 6  # room below the maps for the colour bar's lowest label
NARROW_TEXT = 9  # the size of a narrow picture's bar labels and unit


def picture_source(figure: go.Figure) -> tuple[str, str]:
    """A picture figure as an ``<img>`` source (an SVG data URI) and its colour range in words."""
    svg, span = picture_svg(figure)
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode("ascii"), span


def picture_svg(figure: go.Figure) -> tuple[str, str]:
    """A picture figure as one SVG document (its maps as PNGs) and its colour range in words."""
    meta = figure.layout.meta if isinstance(figure.layout.meta, dict) else {}
    return _mosaic(figure) if "tiles" in meta else _panels(figure)


def colours(z: np.ndarray, colorscale: Any, low: float, high: float) -> np.ndarray:
    """``z`` through a plotly colour scale (linear between its stops, ``low``..``high`` stretched over it) as
    RGBA uint8; NaN transparent."""
    positions = np.array([position for position, _ in colorscale], dtype=np.float64)
    stops = np.array([_rgb(colour) for _, colour in colorscale], dtype=np.float64)
    z = np.asarray(z, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        share = np.clip((z - low) / (high - low), 0.0, 1.0) if high > low else np.full(z.shape, 0.5)
    share = np.nan_to_num(share, nan=0.0)
    rgb = np.stack([np.interp(share, positions, stops[:, channel]) for channel in range(3)], axis=-1)
    alpha = np.where(np.isnan(z), 0.0, 255.0)[..., None]
    return np.concatenate([rgb, alpha], axis=-1).round().astype(np.uint8)


def composite(image: Optional[np.ndarray], heat: Optional[go.Heatmap]) -> np.ndarray:
    """The heatmap's colours over ``image`` as plotly draws them: each heatmap cell covers ``dx`` x ``dy`` image
    pixels from ``x0 - dx/2``, ``y0 - dy/2`` (on pixel centres), blended at the heatmap's opacity."""
    if heat is None:
        return np.asarray(image, dtype=np.uint8)
    z = np.asarray(heat.z, dtype=np.float64)
    painted = colours(z, heat.colorscale, *colour_range(heat))
    if image is None:
        return painted
    image = np.asarray(image, dtype=np.float64)[..., :3]
    rows = _cells(image.shape[0], heat.y0, heat.dy, z.shape[0])
    columns = _cells(image.shape[1], heat.x0, heat.dx, z.shape[1])
    over = painted[rows[:, None], columns[None, :]].astype(np.float64)
    opacity = (1.0 if heat.opacity is None else float(heat.opacity)) * over[..., 3:] / 255.0
    return (image * (1.0 - opacity) + over[..., :3] * opacity).round().astype(np.uint8)


def colour_range(trace: go.Heatmap) -> tuple[float, float]:
    """The heatmap's colour range: its ``zmin``/``zmax``, else its values' (plotly's ``zauto``)."""
    z = np.asarray(trace.z, dtype=np.float64)
    finite = z[np.isfinite(z)]
    low = trace.zmin if trace.zmin is not None else float(finite.min()) if finite.size else 0.0
    high = trace.zmax if trace.zmax is not None else float(finite.max()) if finite.size else 1.0
    return float(low), float(high)


def _rgb(colour: str) -> tuple[float, ...]:
    return plotly.colors.hex_to_rgb(colour) if colour.startswith("#") else plotly.colors.unlabel_rgb(colour)


def _cells(pixels: int, start: Optional[float], step: Optional[float], cells: int) -> np.ndarray:
    """For each image pixel along one side, the heatmap cell over its centre."""
    start = 0.0 if start is None else float(start)
    step = 1.0 if step is None else float(step)
    return np.clip(np.floor((np.arange(pixels) - (start - step / 2)) / step), 0, cells - 1).astype(int)


def _mosaic(figure: go.Figure) -> tuple[str, str]:
    """A ``figures._grid`` mosaic: its maps as one PNG (gaps transparent), each map's caption above it; a mosaic of
    RGB pictures (``figures._rgb_grid``: conv filters) as they are, without a colour bar."""
    heat = figure.data[0]
    rgb = isinstance(heat, go.Image)
    z = np.asarray(heat.z, dtype=np.uint8 if rgb else np.float64)
    frame = _frame(figure)
    scale = frame["width"] / z.shape[1] if frame else WIDTH / max(z.shape[:2])
    if rgb:
        pixels, low, high = z, None, None
    else:
        low, high = colour_range(heat)
        pixels = colours(z, heat.colorscale, low, high)
    parts = [_image(0, CAPTION, z.shape[1] * scale, z.shape[0] * scale, pixels)]
    for (top, left, _, width), annotation in zip(figure.layout.meta["tiles"], figure.layout.annotations):
        parts.append(_text((left + width / 2) * scale, CAPTION + top * scale - 3, str(annotation.text), 10))
    if rgb:
        return _framed(parts, z.shape[1] * scale, CAPTION, z.shape[0] * scale, None, bool(frame)), ""
    bar = (heat.colorscale, low, high, colour_unit(heat)) if heat.showscale is not False else None
    return _framed(parts, z.shape[1] * scale, CAPTION, z.shape[0] * scale, bar, bool(frame)), _span(low, high)


def _panels(figure: go.Figure) -> tuple[str, str]:
    """One panel per subplot, side by side: its image with its heatmap stretched over it (or either alone),
    captioned by the subplot's annotation (on two lines, broken after its role, in a narrow column)."""
    axes = list(dict.fromkeys(trace.xaxis or "x" for trace in figure.data))
    captions = {str(a.xref).split(" ")[0]: str(a.text) for a in figure.layout.annotations or () if a.xref}
    frame = _frame(figure)
    slots = max(len(axes), frame.get("panels", 0)) if frame else len(axes)
    panel = (frame["width"] - PANEL_GAP * (slots - 1)) / slots if frame else PANEL
    top = CAPTION + (11 if frame else 0)  # a narrow column's captions on two lines
    parts, x, height, bar, span = [], 0.0, 0.0, None, ""
    for axis in axes:
        traces = [trace for trace in figure.data if (trace.xaxis or "x") == axis]
        image = next((np.asarray(t.z) for t in traces if isinstance(t, go.Image)), None)
        heat = next((t for t in traces if isinstance(t, go.Heatmap)), None)
        pixels = composite(image, heat)
        panel_height = panel * pixels.shape[0] / pixels.shape[1]
        parts.append(_image(x, top, panel, panel_height, pixels))
        lines = captions.get(axis, "").split(": ", 1) if frame else [captions.get(axis, "")]
        lines = [line + ":" for line in lines[:-1]] + lines[-1:]
        parts += [_text(x + panel / 2, top - 4 - 11 * (len(lines) - 1 - i), line, 10 if frame else 12)
                  for i, line in enumerate(lines)]
        height, x = max(height, panel_height), x + panel + PANEL_GAP
        if heat is not None:
            span = _span(*colour_range(heat))
            if heat.showscale is not False:
                bar = (heat.colorscale, *colour_range(heat), colour_unit(heat))
    across = frame["width"] if frame else x - PANEL_GAP
    return _framed(parts, across, top, height, bar, bool(frame)), span


def _frame(figure: go.Figure) -> dict[str, Any]:
    """The figure's ``layout.meta['frame']`` (a narrow column's), {} for the Datapoint tab's layout."""
    meta = figure.layout.meta if isinstance(figure.layout.meta, dict) else {}
    return meta.get("frame") or {}


def _span(low: float, high: float) -> str:
    return f"colour scale {low:.4g} to {high:.4g}"


def _framed(parts: list[str], width: float, top: float, height: float, bar: Optional[tuple], below: bool) -> str:
    """The SVG of maps ``width`` x ``height`` units drawn from ``top`` down, with the colour bar ``bar``
    (colour scale, low, high, unit; None: no bar) beside them, or under them (``below``: its room kept without a
    bar, so the pictures of a row keep one size)."""
    if below:
        if bar is not None:
            parts.append(_colour_bar_below(top + height + 6, width, *bar))
        return _svg(width, top + height + BAR_BELOW, parts)
    if bar is not None:
        parts.append(_colour_bar(width + 10, top, height, *bar))
    return _svg(width + (BAR if bar is not None else 0), top + height + BOTTOM, parts)


def _svg(width: float, height: float, parts: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.1f} {height:.1f}" width="{width:.1f}" '
            f'height="{height:.1f}" font-family="Open Sans, verdana, arial, sans-serif" fill="#444">'
            + "".join(parts) + "</svg>")


def _image(x: float, y: float, width: float, height: float, pixels: np.ndarray) -> str:
    return (f'<image x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" preserveAspectRatio="none" '
            f'style="image-rendering:pixelated" href="{png_data_uri(pixels)}"/>')


def _text(x: float, y: float, text: str, size: int, anchor: str = "middle", rotate: bool = False) -> str:
    turn = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if rotate else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}"{turn}>'
            f'{escape(text)}</text>')


def _gradient(colorscale: Any, vertical: bool) -> str:
    """The colour scale as an SVG gradient (``#scale``), its low end at the bottom (``vertical``) or on the left."""
    stops = "".join(f'<stop offset="{position:.4f}" stop-color="rgb{tuple(int(round(c)) for c in _rgb(colour))}"/>'
                    for position, colour in colorscale)
    ends = 'x1="0" y1="1" x2="0" y2="0"' if vertical else 'x1="0" y1="0" x2="1" y2="0"'
    return f'<defs><linearGradient id="scale" {ends}>{stops}</linearGradient></defs>'


def _colour_bar(x: float, y: float, height: float, colorscale: Any, low: float, high: float, unit: str) -> str:
    """A vertical bar of the colour scale (``low`` at the bottom), its top, middle and bottom values beside it and
    what it measures (``unit``) along it."""
    labels = [_text(x + 16, y + height * share + 4, f"{value:.3g}", 10, "start")
              for share, value in ((0.0, high), (0.5, (low + high) / 2), (1.0, low))]
    return (_gradient(colorscale, True) + f'<rect x="{x:.1f}" y="{y:.1f}" width="12" height="{height:.1f}" '
            'fill="url(#scale)"/>' + "".join(labels) + _text(x + 70, y + height / 2, unit, 10, rotate=True))


def _colour_bar_below(y: float, width: float, colorscale: Any, low: float, high: float, unit: str) -> str:
    """A horizontal bar of the colour scale ``width`` units long (``low`` on the left), its values under its ends
    and middle, and what it measures (``unit``) under them."""
    labels = [_text(width * share, y + 18, f"{value:.3g}", NARROW_TEXT, anchor)
              for share, value, anchor in ((0.0, low, "start"), (0.5, (low + high) / 2, "middle"),
                                           (1.0, high, "end"))]
    return (_gradient(colorscale, False) + f'<rect x="0" y="{y:.1f}" width="{width:.1f}" height="8" '
            'fill="url(#scale)"/>' + "".join(labels) + _text(width / 2, y + 29, unit, NARROW_TEXT))
