"""Dash callbacks, one module per concern; ``register_callbacks`` wires them all to an app."""

from __future__ import annotations

from dash import Dash

from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.callbacks import (
    compare,
    datapoint,
    export,
    failures,
    gallery,
    model_report,
    pictures,
    run_diff,
    runs,
    scores,
    selection,
    table,
)


def register_callbacks(app: Dash, backend: ViewerBackend) -> None:
    for module in (runs, table, scores, selection, datapoint, compare, model_report, failures, export, pictures,
                   gallery, run_diff):
        module.register(app, backend)
