"""The Embeddings map as a plotly figure: a WebGL scatter (``scattergl``: 100,000 points drawn in about a second) of
the stored map, one trace per colour category (or one on a continuous scale), each point's idx its ``customdata``
(what a click opens, in the browser), then two traces the open datapoint's mark and its nearest neighbours' rings
(``MARK_TRACES``, patched without sending the points again). The arrays go to the browser as typed arrays (plotly's
base64 encoding of NumPy arrays), so 100,000 points cost about 1.6 MB, read without parsing text. ``uirevision``
keeps the user's zoom and selection while colours or marks change."""

from __future__ import annotations

from typing import Optional

import numpy as np
import plotly.graph_objects as go

from run_dir.embedding_file import EmbeddingMap
from runners.eval_viewer.embeddings.colours import NONE, Colouring
from runners.eval_viewer.figures.base import LOOK

MARK_TRACES = 2  # the last traces: the open datapoint's nearest neighbours, then the open datapoint
HEIGHT = 560
MARK_COLOUR = "#111111"
HOVER = "idx %{customdata}<extra>%{fullData.name}</extra>"


def map_figure(found: EmbeddingMap, colours: Colouring, revision: str, marks: tuple[list, list] = ([], []),
               selection: Optional[tuple[str, np.ndarray]] = None) -> go.Figure:
    """The map coloured by ``colours``; ``marks``: the (x, y, idx) of the open datapoint and of its neighbours
    (``mark_points``); ``selection``: a box or lasso drawn on it (``embeddings/data.parse_shape``)."""
    x, y, idx = found.xy[:, 0], found.xy[:, 1], _ids(found.idx)
    size = 5 if len(idx) <= 5_000 else 3
    traces: list[go.Scattergl] = []
    if colours.numbers is not None:
        known = np.isfinite(colours.numbers)
        if (~known).any():
            traces.append(_points(x[~known], y[~known], idx[~known], f"no value ({(~known).sum()})",
                                  {"color": NONE, "size": size}))
        traces.append(_points(x[known], y[known], idx[known], colours.title, {
            "color": colours.numbers[known].astype(np.float32), "colorscale": "Viridis", "size": size,
            "colorbar": {"title": {"text": colours.title, "side": "right"}, "thickness": 12}},
            HOVER.replace("<extra>", " · %{marker.color:.4g}<extra>")))
    for name, colour, rows in colours.categories:
        traces.append(_points(x[rows], y[rows], idx[rows], name, {"color": colour, "size": size}))
    neighbours, opened = marks
    traces.append(go.Scattergl(x=[p[0] for p in neighbours], y=[p[1] for p in neighbours],
                               customdata=[p[2] for p in neighbours], mode="markers", name="more like this",
                               hovertemplate=HOVER, marker={"size": 11, "color": "rgba(0,0,0,0)",
                                                            "line": {"color": MARK_COLOUR, "width": 2}}))
    traces.append(go.Scattergl(x=[p[0] for p in opened], y=[p[1] for p in opened],
                               customdata=[p[2] for p in opened], mode="markers", name="open datapoint",
                               hovertemplate=HOVER, marker={"size": 16, "symbol": "star", "color": "#ffd700",
                                                            "line": {"color": MARK_COLOUR, "width": 1.5}}))
    fig = go.Figure(traces)
    method = "UMAP" if found.about.get("method") == "umap" else "PC"
    axis = {"showticklabels": False, "showgrid": False, "zeroline": False, "ticks": ""}
    fig.update_layout(template=LOOK, height=HEIGHT, dragmode="lasso", uirevision=revision, hovermode="closest",
                      margin={"l": 30, "r": 20, "t": 10, "b": 30}, legend={"orientation": "h", "y": -0.04,
                                                                           "yanchor": "top", "itemsizing": "constant"},
                      xaxis={**axis, "title": {"text": f"{method} 1", "standoff": 4}},
                      yaxis={**axis, "title": {"text": f"{method} 2", "standoff": 4}},
                      selections=[_selection(*selection)] if selection else [],
                      newselection={"mode": "gradual"})  # a box drawn is not held for editing: a click in it opens
    # the point under it (an 'immediate' one would take the click)
    return fig


def mark_points(found: EmbeddingMap, idx: list[int]) -> list[tuple[float, float, int]]:
    """(x, y, idx) of each of ``idx`` the map holds."""
    rows = np.searchsorted(found.idx, idx)
    return [(float(found.xy[r, 0]), float(found.xy[r, 1]), int(i)) for r, i in zip(rows, idx)
            if r < len(found.idx) and found.idx[r] == i]


def _points(x: np.ndarray, y: np.ndarray, idx: np.ndarray, name: str, marker: dict,
            hover: str = HOVER) -> go.Scattergl:
    return go.Scattergl(x=x, y=y, customdata=idx, mode="markers", name=name, hovertemplate=hover,
                        marker={**marker, "opacity": 0.75})


def _ids(idx: np.ndarray) -> np.ndarray:
    """idx as the browser can read them from a typed array: 32-bit where they fit (no 64-bit typed arrays in
    plotly.js), else float64 (exact below 2**53)."""
    return idx.astype(np.int32) if len(idx) == 0 or idx.max() < 2**31 else idx.astype(np.float64)


def _selection(kind: str, shape: np.ndarray) -> dict:
    """A box or lasso as plotly draws a selection made by hand."""
    if kind == "box":
        x0, x1, y0, y1 = (float(v) for v in shape)
        return {"type": "rect", "x0": x0, "x1": x1, "y0": y0, "y1": y1, "xref": "x", "yref": "y"}
    path = "M" + "L".join(f"{x:.6g},{y:.6g}" for x, y in shape) + "Z"
    return {"type": "path", "path": path, "xref": "x", "yref": "y"}
