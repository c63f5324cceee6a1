"""Dash callbacks, one module per concern; ``register_callbacks`` wires them all to an app."""

from __future__ import annotations

from dash import Dash

from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.callbacks import (
    address,
    browser_input,
    compare,
    datapoint,
    export,
    failures,
    filters,
    gallery,
    model_report,
    pending,
    pictures,
    refresh,
    run_diff,
    runs,
    scores,
    selection,
    table,
    training,
    verify,
)

MODULES = (runs, table, scores, selection, datapoint, compare, model_report, failures, verify, training, export,
           pending, refresh, filters, address, pictures, gallery, run_diff)


def register_callbacks(app: Dash, backend: ViewerBackend) -> None:
    """Every callback, then the check that answers a request the page never sends with nothing, before any of them
    runs (``browser_input.refuse_what_the_page_never_sends``)."""
    for module in MODULES:
        module.register(app, backend)
    browser_input.refuse_what_the_page_never_sends(app)
