"""``create_app(log_dirs)``: the eval viewer as a Dash app (serve it with ``python -m runners.eval_viewer``).

Everything the page needs is served by the app itself (Dash's scripts, served locally, and
``assets/viewer.css``), so the viewer works on a machine without internet. The page is Dash's own but for one
line in Dash's index template: where ``assets/plotly_loader.js`` loads plotly.js from, once the table has its rows
or a graph needs it. That is the slim bundle ``build_plotly_bundle.sh`` makes (the traces the viewer draws, 1.3 MB
against Dash's 4.8 MB): the first view with graphs after a page load (the Failures tab) is drawn in half the time.
"""

from __future__ import annotations

import json
import re

import dash
from plotly.offline import get_plotlyjs_version

from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.callbacks import register_callbacks
from runners.eval_viewer.layout.page import address_bar, build_layout

SLIM_PLOTLY_BUNDLE = "plotly-viewer.min.js"
SLIM_PLOTLY_JS_VERSION = "4.1.1"  # PLOTLY_JS in build_plotly_bundle.sh, which built assets/plotly-viewer.min.js
DASH_PLOTLY_BUNDLE = "_dash-component-suites/plotly/package_data/plotly.min.js"  # Dash's full plotly.js


def plotly_url(prefix: str, plotlyjs_version: str) -> str:
    """Where the page loads plotly.js from: the slim bundle, or Dash's full one when the installed plotly package
    expects another plotly.js version (figures could use attributes the bundle does not know)."""
    return f"{prefix}assets/{SLIM_PLOTLY_BUNDLE}" if plotlyjs_version == SLIM_PLOTLY_JS_VERSION \
        else f"{prefix}{DASH_PLOTLY_BUNDLE}"


def create_app(log_dirs: list[str], trust_configs: bool = False, views_file: str | None = None) -> dash.Dash:
    """A viewer over the runs in ``log_dirs`` (each a run or a folder of runs); folders without runs are
    reported in the page. ``trust_configs`` lets it import the config files runs name (see ViewerBackend);
    ``views_file`` keeps the runs' named views (default: ``run_dir.saved_views.default_views_file``)."""
    backend = ViewerBackend(log_dirs, trust_configs=trust_configs, views_file=views_file)
    app = dash.Dash(__name__, title="Lantern eval viewer", suppress_callback_exceptions=True, serve_locally=True,
                    assets_ignore=re.escape(SLIM_PLOTLY_BUNDLE))  # not a script of the page: plotly_loader.js
    url = plotly_url(app.config.requests_pathname_prefix, get_plotlyjs_version())
    app.index_string = app.index_string.replace(  # Dash's own template: where assets/plotly_loader.js finds it
        "{%scripts%}", f"<script>window.lanternPlotlyURL = {json.dumps(url)};</script>\n{{%scripts%}}")
    app.layout = lambda: build_layout(backend, address_bar())
    register_callbacks(app, backend)
    app.viewer_backend = backend  # for scripts and tests that call the backend behind the page
    return app
