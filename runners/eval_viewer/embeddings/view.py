"""The Embeddings tab: the space and colour pickers, the map (``figures.map_figure``) with a note saying what it is
(or that it is being computed, once for the epoch, or why it cannot be), the open datapoint with **More like this**,
and the list of its nearest neighbours."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
from dash import dcc, html

from analysis.feature_spaces import Space
from runners.embeddings import describe
from runners.eval_viewer.embeddings.colours import FAILURE, colour_options, colouring
from runners.eval_viewer.embeddings.data import MAP_ERRORS, MAP_JOBS, PREFIX, chosen_space, parse_shape
from runners.eval_viewer.embeddings.figures import MARK_TRACES, map_figure, mark_points
from runners.eval_viewer.embeddings.ids import (
    EMBEDDING_COLOUR,
    EMBEDDING_MAP,
    EMBEDDING_MORE,
    EMBEDDING_NEAR,
    EMBEDDING_NEIGHBOUR,
    EMBEDDING_NEIGHBOURS,
    EMBEDDING_NOTE,
    EMBEDDING_OPEN,
    EMBEDDING_OPEN_IDX,
    EMBEDDING_POLL,
    EMBEDDING_SELECTION,
    EMBEDDING_SELECTION_NOTE,
    EMBEDDING_SHOW_DATAPOINT,
    EMBEDDING_SHOWN,
    EMBEDDING_SPACE,
    TAB_EMBEDDINGS,
)
from runners.eval_viewer.figures.values import GRAPH_CONFIG
from runners.eval_viewer.pictures.thumbnails import has_pictures
from runners.eval_viewer.pictures.view import picture_address
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.first_view import FirstView
from runners.eval_viewer.shared.runs import Epoch
from runners.eval_viewer.shared.table import TABLE_ERRORS, class_text

NO_EPOCH = "Choose a run and an epoch to map its datapoints."
NO_SPACE = ("This epoch has no feature space to map: capture a layer's output (LayerOutputDebugger, or a debugger "
            "that returns a vector) or debugger summaries, or keep the model's probabilities in the epoch table.")
HOW = "Draw a box or lasso to narrow the table to what it holds; click a point to open it."
POLL_MS = 1000
MAP_CONFIG = {**GRAPH_CONFIG, "displayModeBar": True, "scrollZoom": True}  # lasso and box always at hand
NEIGHBOURS = 10
SPACE_KEY, COLOUR_KEY = "map_space", "map_colour"  # what the address calls the pickers' choices


@dataclass
class MapContent:
    """Everything the tab shows for a run, epoch, space and colour (``map_content``)."""

    note: str
    figure: Any = field(default_factory=dict)
    computing: bool = False
    spaces: list[dict] = field(default_factory=list)
    space: Optional[str] = None
    colours: list[dict] = field(default_factory=list)
    colour: Optional[str] = None
    shown: Optional[dict] = None


def embeddings_tab(backend: ViewerBackend, first: FirstView) -> dcc.Tab:
    """The tab, its map drawn when it is the tab the first page opens on."""
    chosen = {key: (first.address.get(key) or [None])[-1] for key in (SPACE_KEY, COLOUR_KEY)}
    content = map_content(backend, first.run, first.epoch, chosen[SPACE_KEY], chosen[COLOUR_KEY], first.idx,
                          first.narrowing) if first.tab == TAB_EMBEDDINGS else MapContent(NO_EPOCH)
    return dcc.Tab(label="Embeddings", value=TAB_EMBEDDINGS, id=TAB_EMBEDDINGS, children=html.Div([
        html.Div([html.Label("Space"),
                  dcc.Dropdown(id=EMBEDDING_SPACE, options=content.spaces, value=content.space, clearable=False,
                               className="embedding-picker"),
                  html.Label("Colour by"),
                  dcc.Dropdown(id=EMBEDDING_COLOUR, options=content.colours, value=content.colour, clearable=False,
                               className="embedding-picker")], className="embedding-controls"),
        html.P(content.note, id=EMBEDDING_NOTE, className="hint", role="status"),
        dcc.Graph(id=EMBEDDING_MAP, figure=content.figure, config=MAP_CONFIG, className="embedding-map"),
        html.P(id=EMBEDDING_SELECTION_NOTE, className="hint"),
        html.Div(open_datapoint(backend, first.run, first.epoch, first.idx), id=EMBEDDING_OPEN),
        html.Div(id=EMBEDDING_NEIGHBOURS),
        dcc.Interval(id=EMBEDDING_POLL, interval=POLL_MS, disabled=not content.computing),
        dcc.Store(id=EMBEDDING_SHOWN, **({"data": content.shown} if content.shown else {})),
        dcc.Store(id=EMBEDDING_SELECTION), dcc.Store(id=EMBEDDING_NEAR), dcc.Store(id=EMBEDDING_OPEN_IDX),
    ], className="tab-body"))


def map_content(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str], space_key: Optional[str],
                colour: Optional[str], open_idx: Optional[int], narrowed: Optional[dict],
                neighbours: Optional[list[int]] = None) -> MapContent:
    """The map of ``space_key`` (else the epoch's first space) coloured by ``colour`` (else by failure), the open
    datapoint and its ``neighbours`` marked, a selection the table is narrowed to drawn; or what is being computed,
    or why there is no map."""
    run = backend.run(run_path)
    epoch = backend.epoch(run, epoch_key) if run else None
    if epoch is None:
        return MapContent(NO_EPOCH)
    try:
        spaces, space = chosen_space(backend, epoch, space_key)
        if space is None:
            return MapContent(NO_SPACE)
        options = colour_options(backend, epoch, run_path)
        usable = [o["value"] for o in options if not o.get("disabled")]
        colour = colour if colour in usable else FAILURE
        content = MapContent("", spaces=[{"label": s.label, "value": s.key} for s in spaces], space=space.key,
                             colours=options, colour=colour)
        state = MAP_JOBS.map_of(epoch.dir, space, backend.embedding_method)
        if state.found is None:
            content.note, content.computing = state.computing or state.problem, bool(state.computing)
            return content
        found = state.found
        colours = colouring(backend, epoch, run_path, colour, found.idx)
    except (*TABLE_ERRORS, *MAP_ERRORS) as exc:
        return MapContent(f"The map cannot be drawn: {exc}")
    marks = (mark_points(found, neighbours or []), mark_points(found, [] if open_idx is None else [open_idx]))
    content.figure = map_figure(found, colours, f"{run_path}|{epoch_key}|{space.key}", marks,
                                _selection(narrowed, run_path, epoch_key, space))
    content.note = f"{space.label}: {describe(found)}. {HOW}"
    content.shown = {"run": run_path, "epoch": epoch_key, "space": space.key, "colour": colour,
                     "marks": len(content.figure.data) - MARK_TRACES}
    return content


def _selection(narrowed: Optional[dict], run_path: Optional[str], epoch_key: Optional[str],
               space: Space) -> Optional[tuple[str, np.ndarray]]:
    """The box or lasso the table is narrowed to, where it was drawn on this map."""
    key = (narrowed or {}).get("finding") or ""
    if not key.startswith(PREFIX) or (narrowed.get("run"), narrowed.get("epoch")) != (run_path, epoch_key):
        return None
    space_key, _, shape = key.removeprefix(PREFIX).rpartition("|")
    try:
        return parse_shape(shape) if space_key == space.key else None
    except MAP_ERRORS:
        return None


def open_datapoint(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str],
                   idx: Optional[int]) -> list:
    """The open datapoint in a line (its picture, label, prediction), with More like this and a way to its
    Datapoint tab; a hint while none is open."""
    if idx is None:
        return [html.P("Click a point (or a table row) to open a datapoint.", className="hint")]
    return [html.Div([*datapoint_line(backend, run_path, epoch_key, idx),
                      html.Button("More like this", id=EMBEDDING_MORE, className="small-button",
                                  title=f"the {NEIGHBOURS} datapoints nearest to it in this space"),
                      html.Button("Show in the Datapoint tab", id=EMBEDDING_SHOW_DATAPOINT,
                                  className="small-button")],
                     className="embedding-open-line")]


def datapoint_line(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str], idx: int,
                   distance: Optional[float] = None) -> list:
    """A datapoint as a line: its picture (where the run captured images), idx, label and prediction by class name,
    and its distance to the one its neighbours are of."""
    run = backend.run(run_path)
    epoch = backend.epoch(run, epoch_key) if run else None
    parts: list = []
    if run is not None and epoch is not None and has_pictures(backend, run):
        parts.append(html.Img(src=picture_address(run.path, epoch.key, idx, "", _version(backend, epoch)),
                              alt="", className="embedding-picture"))
    parts.append(html.Strong(f"datapoint {idx}"))
    row = _row(backend, epoch, idx)
    classes = backend.class_names(epoch) if epoch is not None and row else {}
    for role in ("label", "prediction"):
        if row.get(role) is not None:
            parts.append(html.Span(f"{role} {class_text(row[role], classes)}", className="embedding-class"))
    if distance is not None:
        parts.append(html.Span(f"distance {distance:.3g}", className="hint"))
    return parts


def neighbour_list(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str], of: int,
                   space_label: str, idx: list[int], distances: list[float]) -> list:
    """The nearest neighbours of ``of``, each a button opening it."""
    return [html.H5(f"More like datapoint {of} (nearest in {space_label})"),
            *[html.Button(datapoint_line(backend, run_path, epoch_key, i, d), n_clicks=0,
                          id={"type": EMBEDDING_NEIGHBOUR, "idx": i}, className="embedding-neighbour",
                          title=f"open datapoint {i}") for i, d in zip(idx, distances)]]


def _row(backend: ViewerBackend, epoch: Optional[Epoch], idx: int) -> dict:
    try:
        rows = backend.table(epoch).page(where=[("idx", "=", idx)], limit=1) if epoch is not None else []
    except TABLE_ERRORS:
        rows = []
    return rows[0] if rows else {}


def _version(backend: ViewerBackend, epoch: Epoch) -> Optional[str]:
    try:
        return backend.version(epoch)
    except TABLE_ERRORS:
        return None

