"""``create_app(log_dirs)``: the eval viewer as a Dash app (serve it with ``python -m runners.eval_viewer``),
assembled from its features (``FEATURES``: each tab or panel, its callbacks, what the browser may send them and,
for a tab, the tab; the tabs show in this order).

Everything the page needs is served by the app itself (Dash's scripts, served locally, and
``assets/viewer.css``), so the viewer works on a machine without internet. The page is Dash's own but for one
line in Dash's index template: where ``assets/plotly_loader.js`` loads plotly.js from, once the table has its rows
or a graph needs it. That is the slim bundle ``build_plotly_bundle.sh`` makes (``shared/plotly_bundle.py``): the
first view with graphs after a page load (the Failures tab) is drawn in half the time.
"""

from __future__ import annotations

import json
import re

import dash
from plotly.offline import get_plotlyjs_version

from runners.eval_viewer.address import callbacks as address
from runners.eval_viewer.compare_epochs import callbacks as compare_epochs
from runners.eval_viewer.compare_runs import callbacks as compare_runs
from runners.eval_viewer.controls import callbacks as controls
from runners.eval_viewer.datapoint import callbacks as datapoint
from runners.eval_viewer.embeddings import callbacks as embeddings
from runners.eval_viewer.export import callbacks as export
from runners.eval_viewer.failures import callbacks as failures
from runners.eval_viewer.gallery import callbacks as gallery
from runners.eval_viewer.many_runs import callbacks as many_runs
from runners.eval_viewer.model_report import callbacks as model_report
from runners.eval_viewer.page import address_bar, build_layout
from runners.eval_viewer.pictures import callbacks as pictures
from runners.eval_viewer.scores import callbacks as scores
from runners.eval_viewer.shared import ids, opened
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.feature import Feature
from runners.eval_viewer.shared.plotly_bundle import SLIM_PLOTLY_BUNDLE, plotly_url
from runners.eval_viewer.shared.request_check import refuse_what_the_page_never_sends
from runners.eval_viewer.shared.request_size import cap_request_size
from runners.eval_viewer.table import callbacks as table
from runners.eval_viewer.tags import callbacks as tags
from runners.eval_viewer.training import callbacks as training

FEATURES: tuple[Feature, ...] = tuple(module.FEATURE for module in (
    controls, table, scores, address, pictures, export,
    tags, datapoint, gallery, embeddings, compare_epochs, compare_runs, many_runs, model_report, failures, training))
# What the browser may send each server callback, by component (a pattern's by its type) and property.
PAGE_SENDS = {key: kind for sends in (ids.SENDS, *(feature.sends for feature in FEATURES))
              for key, kind in sends.items()}


def create_app(log_dirs: list[str], trust_configs: bool = False, views_dir: str | None = None,
               embedding_method: str = "auto") -> dash.Dash:
    """A viewer over the runs in ``log_dirs`` (each a run or a folder of runs); folders without runs are
    reported in the page. ``trust_configs`` lets it import the config files runs name (see ViewerBackend);
    ``views_dir`` keeps the runs' named views (default: ``run_dir.saved_views.default_views_dir``);
    ``embedding_method`` maps the Embeddings tab's spaces ('auto': UMAP where umap-learn is installed, else PCA)."""
    backend = ViewerBackend(log_dirs, trust_configs=trust_configs, views_dir=views_dir,
                            embedding_method=embedding_method)
    app = dash.Dash(__name__, title="Lantern eval viewer", suppress_callback_exceptions=True, serve_locally=True,
                    assets_ignore=re.escape(SLIM_PLOTLY_BUNDLE))  # not a script of the page: plotly_loader.js
    cap_request_size(app.server)  # before every other check: a body too large is never read
    url = plotly_url(app.config.requests_pathname_prefix, get_plotlyjs_version())
    app.index_string = app.index_string.replace(  # Dash's own template: where assets/plotly_loader.js finds it
        "{%scripts%}", f"<script>window.lanternPlotlyURL = {json.dumps(url)};</script>\n{{%scripts%}}")
    tabs = [feature.tab for feature in FEATURES if feature.tab is not None]
    app.layout = lambda: build_layout(backend, address_bar(), tabs)
    for feature in FEATURES:
        feature.register(app, backend)
    opened.register(app)  # the follow-ups of an open datapoint the features added
    refuse_what_the_page_never_sends(app, PAGE_SENDS)  # once every callback is registered
    app.viewer_backend = backend  # for scripts and tests that call the backend behind the page
    return app
