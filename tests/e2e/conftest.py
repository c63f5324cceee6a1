"""A real viewer (Dash on 127.0.0.1, a free port) and a real headless Chromium driving it.

Waiting: a browser test waits for one of the app's own ready signals (the table's caption naming the epoch, a
drawn figure, Dash's callback queue empty: ``viewer_page.py``), never for a fixed time, and waits up to
``WAIT_MS`` (``SLOW_WAIT_MS`` for what the viewer computes on first show, such as the Failures tab's analysis).
Pages from ``new_page`` wait ``WAIT_MS`` by default; use ``expect`` below rather than playwright's own, whose
assertions give up after 5 s (which failed the suite on a loaded machine).
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import pytest

from tests.reliability.viewer_server import STOPPED_URLS, serve_viewer

__all__ = ["serve_viewer"]  # the viewer served in a thread (its URL has no trailing slash)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Generous: the suite must pass on a loaded 2-core laptop, where one callback can take tens of seconds. These are
# ways out of a wait that will never end, not how long a test takes.
WAIT_MS = 60_000
SLOW_WAIT_MS = 180_000
# Trace types plotly did not draw as asked: an unregistered type silently falls back to a scatter.
UNDRAWN_TRACES = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(plot => (plot.data || [])
    .map((trace, i) => [trace.type || 'scatter', ((plot._fullData || [])[i] || {}).type])
    .filter(([asked, drawn]) => drawn !== undefined && asked !== drawn).map(([asked]) => asked))"""

# Debug outputs drawn as figures (a custom debugger's bars) and over the input image (Grad-CAM).
DEBUGGER = """
from configs.examples.custom_debugger_trainer import ChannelEnergyDebugger
from debuggers.gradcam_debugger import GradCAMDebugger
config["debugger"] = {"class": SequentialDebugger, "args": {"page_size_mb": 4, "debuggers_config": [
    {"name": "layer3_energy",
     "debugger_config": {"class": ChannelEnergyDebugger, "args": {"layer_name": "backbone.layer3"}}},
    {"name": "gradcam", "debugger_config": {"class": GradCAMDebugger, "args": {"target_layer": "backbone.layer4"}}}]}}
"""


def browser_or_skip() -> None:
    """Skip where no browser can run, with the reason; on CI (CI=true) that is a failure instead."""
    missing = [] if os.path.exists(CHROMIUM) else [f"{CHROMIUM} (install Debian's chromium package)"]
    if importlib.util.find_spec("playwright") is None:
        missing.append("the playwright Python package (pip install playwright; no browser download needed)")
    if not missing:
        return
    reason = f"the browser test needs {' and '.join(missing)}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}, which CI must provide")
    pytest.skip(reason)


def expect(actual: Any, timeout_ms: int = WAIT_MS) -> Any:
    """playwright's ``expect(actual)`` whose assertions retry for up to ``timeout_ms`` (imported here, once a test
    knows it has a browser)."""
    from playwright.sync_api import expect as playwright_expect

    playwright_expect.set_options(timeout=timeout_ms)
    return playwright_expect(actual)


@pytest.fixture(scope="module")
def browser():
    browser_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def viewer_url(logs):
    """The viewer over the module's ``logs`` fixture (the runs its tests open); a module serving something else
    defines its own ``viewer_url``."""
    with serve_viewer([str(logs)]) as url:
        yield url


def _after_stop(message: Any) -> bool:
    """Whether the console message is a network error (refused, reset, not connected) of a request to a viewer
    whose server the test already stopped."""
    url = (message.location or {}).get("url", "")
    return "net::ERR_" in message.text and any(url.startswith(stopped) for stopped in STOPPED_URLS)


@pytest.fixture
def new_page(browser):
    """Factory of fresh pages (own URL, no state left by another test); failed callbacks and uncaught errors of
    the page's scripts (which Chromium reports apart from the console) fail the test."""
    pages, errors = [], []

    def make(url: str, width: int = 1500, height: int = 1000):
        page = browser.new_page(viewport={"width": width, "height": height})
        page.set_default_timeout(WAIT_MS)
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" and not _after_stop(m) else None)
        page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
        page.goto(url)
        pages.append(page)
        return page

    yield make
    for page in pages:
        if not page.is_closed():
            errors.extend(f"a figure draws a trace type the viewer's plotly bundle lacks ({kind}): add it in "
                          "runners/eval_viewer/build_plotly_bundle.sh and rerun it"
                          for kind in page.evaluate(UNDRAWN_TRACES))
            page.close()
    assert not errors, f"the page logged errors: {errors}"
