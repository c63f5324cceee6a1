"""The saved views control, and the store the address bar's writer outputs to (``address/callbacks.py``)."""

from __future__ import annotations

from typing import Optional

from dash import dcc, html

from runners.eval_viewer.address.ids import SAVE_VIEW, SAVE_VIEW_ASKED, SAVED_VIEWS, URL_STATE, VIEW_NAME, VIEW_NOTE
from runners.eval_viewer.address.saved_views import SavedViewsError
from runners.eval_viewer.shared.backend import ViewerBackend


def saved_views(backend: ViewerBackend, run_path: Optional[str]) -> html.Div:
    """The run's named views: pick one to open it, or name the view shown and save it."""
    options, problem = view_options(backend, run_path)
    return html.Div([
        html.Label("Saved views"),
        html.Div([dcc.Dropdown(id=SAVED_VIEWS, options=options, placeholder="open a saved view",
                               clearable=False, style={"minWidth": "160px"}),
                  dcc.Input(id=VIEW_NAME, placeholder="name this view", maxLength=80, debounce=False,
                            className="view-name"),
                  html.Button("Save view", id=SAVE_VIEW, className="small-button"),
                  dcc.Store(id=SAVE_VIEW_ASKED),
                  html.Span(problem, id=VIEW_NOTE, className="hint")], className="saved-views"),
        dcc.Store(id=URL_STATE),
    ], className="control")


def view_options(backend: ViewerBackend, run_path: Optional[str]) -> tuple[list[dict], str]:
    """The run's saved views as options (the value is the view's address), and what is wrong with the file."""
    try:
        views = backend.views.of_run(run_path)
    except SavedViewsError as exc:
        return [], str(exc)
    return [{"label": name, "value": address} for name, address in sorted(views.items())], ""
