"""Dash callbacks, one module per concern; ``register_callbacks`` wires them all to an app."""

from __future__ import annotations

from dash import Dash

from runners.eval_viewer.address import callbacks as address
from runners.eval_viewer.compare_epochs import callbacks as compare
from runners.eval_viewer.compare_runs import callbacks as run_diff
from runners.eval_viewer.controls import callbacks as runs
from runners.eval_viewer.controls import refresh
from runners.eval_viewer.datapoint import view as datapoint
from runners.eval_viewer.export import callbacks as export
from runners.eval_viewer.failures import callbacks as failures
from runners.eval_viewer.failures import verify
from runners.eval_viewer.gallery import callbacks as gallery
from runners.eval_viewer.model_report import callbacks as model_report
from runners.eval_viewer.pictures import callbacks as pictures
from runners.eval_viewer.scores import data as scores
from runners.eval_viewer.shared import browser_input, pending
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.table import data as table
from runners.eval_viewer.table import filters, selection
from runners.eval_viewer.training import callbacks as training

MODULES = (runs, table, scores, selection, datapoint, compare, model_report, failures, verify, training, export,
           pending, refresh, filters, address, pictures, gallery, run_diff)


def register_callbacks(app: Dash, backend: ViewerBackend) -> None:
    """Every callback, then the check that answers a request the page never sends with nothing, before any of them
    runs (``browser_input.refuse_what_the_page_never_sends``)."""
    for module in MODULES:
        module.register(app, backend)
    browser_input.refuse_what_the_page_never_sends(app)
