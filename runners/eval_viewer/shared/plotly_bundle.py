"""Which plotly.js the page and the HTML export use: the viewer's slim bundle (``build_plotly_bundle.sh``: the
traces the viewer draws, 1.3 MB against Dash's 4.8 MB) where it fits the installed plotly package, else plotly's own
(figures could use attributes the bundle does not know)."""

from __future__ import annotations

import os

from plotly.offline import get_plotlyjs, get_plotlyjs_version

SLIM_PLOTLY_BUNDLE = "plotly-viewer.min.js"
SLIM_PLOTLY_JS_VERSION = "4.1.1"  # PLOTLY_JS in build_plotly_bundle.sh, which built assets/plotly-viewer.min.js
SLIM_PLOTLY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets", SLIM_PLOTLY_BUNDLE)
DASH_PLOTLY_BUNDLE = "_dash-component-suites/plotly/package_data/plotly.min.js"  # Dash's full plotly.js


def plotly_url(prefix: str, plotlyjs_version: str) -> str:
    """Where the page loads plotly.js from: the slim bundle, or Dash's full one when the installed plotly package
    expects another plotly.js version."""
    return f"{prefix}assets/{SLIM_PLOTLY_BUNDLE}" if plotlyjs_version == SLIM_PLOTLY_JS_VERSION \
        else f"{prefix}{DASH_PLOTLY_BUNDLE}"


def plotly_js() -> str:
    """The text of the plotly.js an exported report embeds: the slim bundle where it fits, else plotly's."""
    if get_plotlyjs_version() == SLIM_PLOTLY_JS_VERSION and os.path.isfile(SLIM_PLOTLY):
        with open(SLIM_PLOTLY, encoding="utf-8") as f:
            return f.read()
    return get_plotlyjs()
