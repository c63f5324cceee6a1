"""Figures of maps drawn as pictures: one SVG ``<img>`` holding the maps as PNGs, their captions and colour bar.

A map a researcher looks at rather than reads value by value (feature-map channels, a layer's pooled maps,
Grad-CAM and patch attention over the input image; ``figures.is_picture``) costs plotly.js 30-120 ms
to draw on every click, and its image travels as a JSON array of pixels. As one image it costs the browser the
decoding of a few kB, and the page's renderer one component (it pays per component: a ``<figure>`` per map
cost more than plotly did). The figure stays the description of what is drawn: the picture is made from its
traces (their colour scale and range, the heatmap's place over the image and its opacity), so the same figure is
a plotly graph, hover values included, in the HTML export and in the comparison views.
"""

from __future__ import annotations

import base64
from html import escape
from typing import Any, Optional

import numpy as np
import plotly.colors
import plotly.graph_objects as go
from dash import html

from data.viewer.layout.display.figures import png_data_uri
from data.viewer.layout.display.values import FIGURE_TITLE

WIDTH = 480  # SVG units the maps span; the page scales the picture to its column
PANEL = 240  # width of one panel (a Grad-CAM) in SVG units
CAPTION = 16  # room above a map for its caption
BAR = 70  # room on the right for the colour bar and its labels
BOTTOM = 6  # room below the maps for the colour bar's lowest label


def picture_component(figure: go.Figure, class_name: str) -> html.Figure:
    """A picture figure (``is_picture``) as one image: a mosaic of maps (``layout.meta['tiles']``) or panels of a
    heatmap over an image, with one colour bar; its colour range on hover."""
    source, span = picture_source(figure)
    title = str(figure.layout.title.text or "")
    image = html.Img(src=source, alt=title, title=span, className="picture")
    return html.Figure([html.Figcaption(title, className="figure-title", style=FIGURE_TITLE), image],
                       className=f"{class_name} picture-figure")


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
    scale = WIDTH / max(z.shape[:2])
    if rgb:
        pixels, low, high = z, None, None
    else:
        low, high = colour_range(heat)
        pixels = colours(z, heat.colorscale, low, high)
    parts = [_image(0, CAPTION, z.shape[1] * scale, z.shape[0] * scale, pixels)]
    for (top, left, _, width), annotation in zip(figure.layout.meta["tiles"], figure.layout.annotations):
        parts.append(_text((left + width / 2) * scale, CAPTION + top * scale - 3, str(annotation.text), 10))
    height = CAPTION + z.shape[0] * scale
    if rgb:
        return _svg(z.shape[1] * scale, height + BOTTOM, parts), ""
    parts.append(_colour_bar(z.shape[1] * scale + 10, CAPTION, z.shape[0] * scale, heat.colorscale, low, high))
    return _svg(z.shape[1] * scale + BAR, height + BOTTOM, parts), f"colour scale {low:.4g} to {high:.4g}"


def _panels(figure: go.Figure) -> tuple[str, str]:
    """One panel per subplot, side by side: its image with its heatmap stretched over it (or either alone),
    captioned by the subplot's annotation."""
    axes = list(dict.fromkeys(trace.xaxis or "x" for trace in figure.data))
    captions = {str(a.xref).split(" ")[0]: str(a.text) for a in figure.layout.annotations or () if a.xref}
    parts, x, height, bar = [], 0.0, 0.0, None
    for axis in axes:
        traces = [trace for trace in figure.data if (trace.xaxis or "x") == axis]
        image = next((np.asarray(t.z) for t in traces if isinstance(t, go.Image)), None)
        heat = next((t for t in traces if isinstance(t, go.Heatmap)), None)
        pixels = composite(image, heat)
        panel_height = PANEL * pixels.shape[0] / pixels.shape[1]
        parts += [_image(x, CAPTION, PANEL, panel_height, pixels),
                  _text(x + PANEL / 2, CAPTION - 4, captions.get(axis, ""), 12)]
        height, x = max(height, panel_height), x + PANEL + 12
        if heat is not None and heat.showscale is not False:
            bar = (heat.colorscale, *colour_range(heat))
    span = ""
    if bar is not None:
        parts.append(_colour_bar(x - 2, CAPTION, height, *bar))
        span = f"colour scale {bar[1]:.4g} to {bar[2]:.4g}"
    return _svg(x - 12 + (BAR if bar is not None else 0), CAPTION + height + BOTTOM, parts), span


def _svg(width: float, height: float, parts: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.1f} {height:.1f}" width="{width:.1f}" '
            f'height="{height:.1f}" font-family="Open Sans, verdana, arial, sans-serif" fill="#444">'
            + "".join(parts) + "</svg>")


def _image(x: float, y: float, width: float, height: float, pixels: np.ndarray) -> str:
    return (f'<image x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" preserveAspectRatio="none" '
            f'style="image-rendering:pixelated" href="{png_data_uri(pixels)}"/>')


def _text(x: float, y: float, text: str, size: int, anchor: str = "middle") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}">{escape(text)}</text>'


def _colour_bar(x: float, y: float, height: float, colorscale: Any, low: float, high: float) -> str:
    """A vertical bar of the colour scale (``low`` at the bottom), its top, middle and bottom values beside it."""
    stops = "".join(f'<stop offset="{position:.4f}" stop-color="rgb{tuple(int(round(c)) for c in _rgb(colour))}"/>'
                    for position, colour in colorscale)
    labels = [_text(x + 16, y + height * share + 4, f"{value:.3g}", 10, "start")
              for share, value in ((0.0, high), (0.5, (low + high) / 2), (1.0, low))]
    return (f'<defs><linearGradient id="scale" x1="0" y1="1" x2="0" y2="0">{stops}</linearGradient></defs>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="12" height="{height:.1f}" fill="url(#scale)"/>' + "".join(labels))
