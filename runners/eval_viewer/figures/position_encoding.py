"""Figures of a position encoding, a (C, h, w) vector per cell of a grid: its individual dimensions, its top-3
principal components as RGB, the wavelength of its frequencies, and how alike the encodings of two positions are,
which is what attention between positions can tell apart. SAM2 has two: the sine encoding of the image encoder's
features (DETR's: each dimension follows one axis) and the random Fourier encoding of the prompts (SAM's: each
dimension a random direction); drawn side by side, their similarity maps compare them."""

from __future__ import annotations

from typing import Optional

import numpy as np
import plotly.graph_objects as go

from runners.eval_viewer.figures.base import (
    AXIS_TITLES,
    NARROW_BAR_MARGIN,
    Figures,
    finish,
    image_axes,
    labelled_mosaic,
    maps_figure,
    narrow_colour_bar,
    pca_rgb,
    top_margin,
)

MAX_DIMS = 16
SIMILARITY_TILE_PX = 120


def encoding_figures(encoding: np.ndarray, encoding_type: str, frequencies: Optional[np.ndarray] = None,
                     show_individual_dims: bool = True, name: str = "position encoding") -> Figures:
    """A (C, h, w) ``encoding`` of type 'sine' or 'random' (another is drawn as neither): ``MAX_DIMS`` of its
    dimensions over the grid, its top-3 principal components as RGB, and, given its ``frequencies``, their
    wavelengths."""
    channels, height, width = encoding.shape
    figures: Figures = []
    if show_individual_dims:
        dims = sorted(set(np.linspace(0, channels - 1, min(MAX_DIMS, channels)).astype(int).tolist()))
        figures.append(maps_figure([encoding[d] for d in dims], [_dimension(d, channels, encoding_type) for d in dims],
                                   f"{name}: {len(dims)} of {channels} dimensions over the {height}x{width} grid"
                                   f"{_halves(encoding_type)}", "encoding"))
    pca = go.Figure(go.Image(z=pca_rgb(encoding)))
    pca = image_axes(pca)
    figures.append(finish(pca, f"{name}: top-3 principal components as RGB", 300))
    wavelengths = frequencies_figure(frequencies, encoding_type, name) if frequencies is not None else None
    return figures + ([wavelengths] if wavelengths is not None else [])


def _dimension(d: int, channels: int, encoding_type: str) -> str:
    """A dimension's caption: which axis (sine) or function (random) it is."""
    if encoding_type == "sine":
        return f"dim {d} ({'y' if d < channels // 2 else 'x'})"
    if encoding_type == "random":
        return f"dim {d} ({'sin' if d < channels // 2 else 'cos'})"
    return f"dim {d}"


def _halves(encoding_type: str) -> str:
    return {"sine": " (first half rows, second half columns)",
            "random": " (first half sines, second half cosines)"}.get(encoding_type, "")


def frequencies_figure(frequencies: np.ndarray, encoding_type: str, name: str) -> Optional[go.Figure]:
    """The wavelength of each frequency, in widths of the image: a sine encoding's (F,) divisors ``f`` (a period
    of 2 pi f over coordinates spanning 2 pi: f of the image), bars per dimension; a random encoding's (2, F)
    Gaussian frequency vectors ``g`` (a period where the coordinate in [-1, 1] moves 1 / |g|: 1 / (2 |g|) of the
    image), dots at (g_x, g_y) coloured by wavelength."""
    frequencies = np.asarray(frequencies, dtype=np.float64)
    if encoding_type == "sine" and frequencies.ndim == 1:
        fig = go.Figure(go.Bar(x=np.arange(len(frequencies)), y=frequencies,
                               hovertemplate="dimension %{x}: %{y:.3g} of the image<extra></extra>"))
        fig.update_xaxes(title_text="dimension (per axis)")
        fig.update_yaxes(title_text="wavelength (image widths)", type="log")
        return finish(fig, f"{name}: the wavelength of each dimension", 260, AXIS_TITLES)
    if encoding_type == "random" and frequencies.ndim == 2 and frequencies.shape[0] == 2:
        wavelength = 1 / (2 * np.maximum(np.hypot(frequencies[0], frequencies[1]), 1e-12))
        fig = go.Figure(go.Scatter(
            x=frequencies[0], y=frequencies[1], mode="markers+text", text=[str(k) for k in range(len(wavelength))],
            textposition="top center", textfont={"size": 9}, customdata=wavelength,
            marker={"size": 10, "color": np.log10(wavelength), "colorscale": "Viridis",
                    "colorbar": narrow_colour_bar("log10 wavelength")},
            hovertemplate="frequency %{text}: (%{x:.2f}, %{y:.2f}), wavelength %{customdata:.3g} of the image"
                          "<extra></extra>"))
        fig.update_xaxes(title_text="g_x (along x)", zeroline=True)
        fig.update_yaxes(title_text="g_y (along y)", zeroline=True, scaleanchor="x")
        return finish(fig, f"{name}: its random frequencies, each a direction and a wavelength", 380,
                      {**AXIS_TITLES, "r": NARROW_BAR_MARGIN})
    return None


def similarity_figure(encodings: dict[str, np.ndarray]) -> Optional[go.Figure]:
    """For each encoding (a row, named by its key), the cosine similarity of every cell's encoding to that of a
    reference cell (a column: a corner, the centre, a quarter in): how sharply the encoding tells a position from
    its neighbours, and whether far positions look alike."""
    shapes = {encoding.shape[1:] for encoding in encodings.values()}
    if len(shapes) != 1:
        return None
    height, width = shapes.pop()
    references = [(0, 0), (height // 2, width // 2), (height // 4, (3 * width) // 4)]
    rows = [[_similarity(encoding, cell) for cell in references] for encoding in encodings.values()]
    mosaic, labels, tile = labelled_mosaic(rows, list(encodings), [f"to cell ({r}, {c})" for r, c in references])
    fig = go.Figure(go.Heatmap(z=mosaic, colorscale="RdBu_r", zmin=-1.0, zmax=1.0, hoverongaps=False,
                               colorbar=narrow_colour_bar("cosine similarity"),
                               hovertemplate="row %{y}, col %{x}: %{z:.3f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[c + k * tile[1] for _ in rows for k, (_, c) in enumerate(references)],
                             y=[r + i * tile[0] for i in range(len(rows)) for r, _ in references], mode="markers",
                             marker={"symbol": "x", "size": 8, "color": "black"}, hoverinfo="skip"))
    fig.update_layout(annotations=labels, showlegend=False, plot_bgcolor="white")
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False, scaleanchor="y", constrain="domain",
                     constraintoward="left")
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False, autorange="reversed", constrain="domain",
                     constraintoward="top")
    title = "position encodings compared: how alike each cell's encoding is to a reference cell's (x)"
    top = top_margin(title, [str(label["text"]) for label in labels[:len(references)]])
    cell = SIMILARITY_TILE_PX / max(height, width)
    return finish(fig, title, int(top + 30 + cell * mosaic.shape[0]), {"l": 200, "t": top, "r": NARROW_BAR_MARGIN})


def _similarity(encoding: np.ndarray, cell: tuple[int, int]) -> np.ndarray:
    """The cosine similarity of each cell's encoding vector to ``cell``'s, as an (h, w) map."""
    vectors = encoding.reshape(encoding.shape[0], -1).astype(np.float64)
    norms = np.linalg.norm(vectors, axis=0)
    reference = vectors[:, cell[0] * encoding.shape[2] + cell[1]]
    cosine = reference @ vectors / np.maximum(norms * np.linalg.norm(reference), 1e-12)
    return cosine.reshape(encoding.shape[1:])
