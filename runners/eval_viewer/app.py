"""``create_app(log_dirs)``: the eval viewer as a Dash app (serve it with ``python -m runners.eval_viewer``).

Everything the page needs is served by the app itself (Dash's scripts, served locally, and
``assets/viewer.css``), so the viewer works on a machine without internet. The page is Dash's own: its
index, its scripts and its plotly.js, which the first page does not load (it draws no plotly graph):
``assets/plotly_loader.js`` loads it when the table has its rows or a graph needs it.
"""

from __future__ import annotations

import dash

from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.callbacks import register_callbacks
from runners.eval_viewer.layout.page import address_bar, build_layout


def create_app(log_dirs: list[str], trust_configs: bool = False, views_file: str | None = None) -> dash.Dash:
    """A viewer over the runs in ``log_dirs`` (each a run or a folder of runs); folders without runs are
    reported in the page. ``trust_configs`` lets it import the config files runs name (see ViewerBackend);
    ``views_file`` keeps the runs' named views (default: ``backend/saved_views.default_views_file``)."""
    backend = ViewerBackend(log_dirs, trust_configs=trust_configs, views_file=views_file)
    app = dash.Dash(__name__, title="Lantern eval viewer", suppress_callback_exceptions=True, serve_locally=True)
    app.layout = lambda: build_layout(backend, address_bar())
    register_callbacks(app, backend)
    app.viewer_backend = backend  # for scripts and tests that call the backend behind the page
    return app
