"""``create_app(log_dirs)``: the eval viewer as a Dash app (serve it with ``python -m runners.eval_viewer``).

Everything the page needs is served by the app itself (Dash's scripts and
``assets/viewer.css``), so the viewer works on a machine without internet.
The page's scripts are trimmed for a fast first load (``first_page_scripts``); plotly.js is not one of
them: ``assets/plotly_loader.js`` loads it (from ``plotly_url``) when the page is ready or a graph needs it.
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
# Scripts Dash puts in every page that the viewer does not need: @babel/polyfill (core-js for old browsers; the
# one part Dash still uses, regeneratorRuntime, comes from assets/regenerator-runtime.js) and the DataTable bundle.
UNUSED_SCRIPTS = re.compile(r'<script src="[^"]*/(deps/polyfill@|dash_table/bundle)[^"]*"></script>\n?')
# Chunks Dash loads only once the first page has rendered (dropdowns, the table's AG Grid): loaded with the page
# instead, their components draw in the first render rather than in a second round after a download. (The first
# page draws no graph: the graphs' chunk comes with plotly.js, later.)
FIRST_PAGE_CHUNKS = ("dash/dcc/async-dropdown.js", "dash_ag_grid/async-community.js")


def plotly_url(prefix: str, plotlyjs_version: str) -> str:
    """Where the page loads plotly.js from: the slim bundle, or Dash's full one when the installed plotly package
    expects another plotly.js version (figures could use attributes the bundle does not know)."""
    return f"{prefix}assets/{SLIM_PLOTLY_BUNDLE}" if plotlyjs_version == SLIM_PLOTLY_JS_VERSION \
        else f"{prefix}{DASH_PLOTLY_BUNDLE}"


def first_page_scripts(scripts: str, prefix: str) -> str:
    """Dash's script tags for the page without the unused ones, plus the chunks the first page draws with, after
    the address ``assets/plotly_loader.js`` loads plotly.js from."""
    chunks = "".join(f'\n<script src="{prefix}_dash-component-suites/{chunk}"></script>' for chunk in FIRST_PAGE_CHUNKS)
    plotly = f"<script>window.lanternPlotlyURL = {json.dumps(plotly_url(prefix, get_plotlyjs_version()))};</script>\n"
    return plotly + UNUSED_SCRIPTS.sub("", scripts) + chunks


class ViewerDash(dash.Dash):
    """The viewer's Dash app: its page loads only the scripts the viewer uses (``first_page_scripts``)."""

    def interpolate_index(self, **kwargs: str) -> str:
        kwargs["scripts"] = first_page_scripts(kwargs.get("scripts", ""), self.config.requests_pathname_prefix)
        return super().interpolate_index(**kwargs)


def create_app(log_dirs: list[str], trust_configs: bool = False, views_file: str | None = None) -> dash.Dash:
    """A viewer over the runs in ``log_dirs`` (each a run or a folder of runs); folders without runs are
    reported in the page. ``trust_configs`` lets it import the config files runs name (see ViewerBackend);
    ``views_file`` keeps the runs' named views (default: ``backend/saved_views.default_views_file``)."""
    backend = ViewerBackend(log_dirs, trust_configs=trust_configs, views_file=views_file)
    app = ViewerDash(__name__, title="Lantern eval viewer", suppress_callback_exceptions=True,
                     assets_ignore=re.escape(SLIM_PLOTLY_BUNDLE))  # not a script of the page: plotly_loader.js
    app.layout = lambda: build_layout(backend, address_bar())
    register_callbacks(app, backend)
    app.viewer_backend = backend  # for scripts and tests that call the backend behind the page
    return app
