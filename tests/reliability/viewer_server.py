"""A real eval viewer server on a free loopback port, and its callbacks called over HTTP as a browser would.

Callbacks are found through Dash's own ``/_dash-dependencies`` answer by the component they update, so a test
names what it wants to see (the datapoint panel, the table) and not the callback's full signature.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional

from werkzeug.serving import make_server

from runners.eval_viewer.app import create_app
from runners.eval_viewer.shared import request_check
from tests.runs import REPO_ROOT

# How long a test waits for the viewer's answer over HTTP, or for a viewer process to print its address: generous
# ways out for a loaded 2-core machine (tests/e2e/conftest.py has the browser's), not how long a test takes.
HTTP_WAIT_S = 120
START_WAIT_S = 180
# The base URLs of viewers whose server has stopped: a page still open on one may log refused connections (its
# polls after the test's ``with serve_viewer`` block), which say nothing about the viewer (tests/e2e/conftest.py).
STOPPED_URLS: set[str] = set()


@contextmanager
def serve_viewer(log_dirs: list[str], refused: Optional[list[str]] = None, **options: Any) -> Iterator[str]:
    """The viewer app over ``log_dirs`` served by werkzeug in threads; yields its base URL.

    A callback request refused as one the page never sends (``request_check.refuse_what_the_page_never_sends``)
    fails the test when the server stops, naming it: the page's own requests must all pass, or a feature would
    silently do nothing. A test that sends such requests on purpose passes ``refused``, a list that collects them
    as they come.
    """
    flask_app = create_app(log_dirs, **options).server
    refusals = _Refusals(flask_app, [] if refused is None else refused)
    request_check.LOG.addHandler(refusals)
    server = make_server("127.0.0.1", 0, flask_app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        yield url
    finally:
        STOPPED_URLS.add(url)
        server.shutdown()
        thread.join(timeout=HTTP_WAIT_S)
        request_check.LOG.removeHandler(refusals)
    if refused is None and refusals.messages:
        raise AssertionError("the viewer refused requests as ones the page never sends (the features' SENDS, joined in "
                             f"app.PAGE_SENDS): {refusals.messages[:5]}")


class _Refusals(logging.Handler):
    """The refusals of one viewer (its Flask app), whichever thread served them."""

    def __init__(self, flask_app: Any, messages: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.flask_app, self.messages = flask_app, messages

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "viewer", None) is self.flask_app:
            self.messages.append(record.getMessage())


def dependencies(url: str, timeout: float = HTTP_WAIT_S) -> list[dict]:
    """The app's callbacks as Dash's ``/_dash-dependencies`` lists them (the page's own list)."""
    with urllib.request.urlopen(f"{url}/_dash-dependencies", timeout=timeout) as response:
        return json.load(response)


def call_callback(url: str, output: str, values: dict[str, Any], timeout: float = HTTP_WAIT_S) -> tuple[int, str]:
    """POST the callback updating ``output`` (``'<id>.<property>'``) with inputs and states from
    ``values`` (``{'<id>.<property>': value}``, others None); returns the HTTP status and the body."""
    callback = next(c for c in dependencies(url, timeout) if output in _outputs(c["output"]))
    return post_callback(url, callback, values, timeout=timeout)


def post_callback(url: str, callback: dict, values: dict[str, Any], changed: Optional[list[str]] = None,
                  timeout: float = HTTP_WAIT_S) -> tuple[int, str]:
    """POST ``callback`` (one of ``dependencies``) as the page does (``callback_body``); returns the HTTP status and
    the body."""
    request = urllib.request.Request(f"{url}/_dash-update-component",
                                     data=json.dumps(callback_body(callback, values, changed)).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def callback_body(callback: dict, values: dict[str, Any], changed: Optional[list[str]] = None) -> dict:
    """A request for ``callback`` (one of ``dependencies``) as the page sends it, with inputs and states from
    ``values`` (by ``dependency_name``, others None; a pattern's for one component matching it) and ``changed``
    the names of the inputs that changed (default: all)."""
    def fill(dependency: dict) -> Any:
        value = values.get(dependency_name(dependency))
        if not dependency["id"].startswith("{"):
            return {**dependency, "value": value}
        component = {key: "0" if isinstance(part, list) else part for key, part in json.loads(dependency["id"]).items()}
        return [{"id": component, "property": dependency["property"], "value": value}]

    inputs = [fill(dependency) for dependency in callback["inputs"]]
    named = {dependency_name(d): item for d, item in zip(callback["inputs"], inputs)}
    outputs = [dict(zip(("id", "property"), o.rsplit(".", 1))) for o in _outputs(callback["output"])]
    return {"output": callback["output"], "outputs": outputs if callback["output"].startswith("..") else outputs[0],
            "inputs": inputs, "state": [fill(dependency) for dependency in callback["state"]],
            "changedPropIds": [_prop_id(named[name]) for name in (named if changed is None else changed)]}


def dependency_name(dependency: dict) -> str:
    """``'<id>.<property>'`` of a callback's input or state; a pattern's id is its ``type``."""
    component = dependency["id"]
    return f"{json.loads(component)['type'] if component.startswith('{') else component}.{dependency['property']}"


def _prop_id(item: Any) -> str:
    """An input as ``changedPropIds`` names it (a pattern's first component, its id's keys sorted)."""
    item = item[0] if isinstance(item, list) else item
    component = item["id"]
    text = json.dumps(component, sort_keys=True, separators=(",", ":")) if isinstance(component, dict) else component
    return f"{text}.{item['property']}"


def _outputs(spec: str) -> list[str]:
    """``'a.children'`` or ``'..a.figure...b.data..'`` (several outputs) as ``['<id>.<property>', ...]``."""
    return spec.strip(".").split("...") if spec.startswith("..") else [spec]


@contextmanager
def viewer_process(args: list[str], cwd: str, timeout: float = START_WAIT_S) -> Iterator[tuple[str, str]]:
    """``python -m runners.eval_viewer --port 0 ARGS`` in a real process started in ``cwd`` (the repo on its
    path); yields the address it printed and its output up to there, and stops it afterwards."""
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    process = subprocess.Popen([sys.executable, "-m", "runners.eval_viewer", "--port", "0", *args], cwd=cwd, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            lines.append(line)
            if match := re.search(r"open (http://\S+)", line):
                # its request log is read on (and dropped): a full pipe would stop the server mid-request
                threading.Thread(target=process.stdout.read, daemon=True).start()
                yield match.group(1), "".join(lines)
                return
            if not line and process.poll() is not None:
                break
        raise AssertionError(f"the viewer printed no address; its output:\n{''.join(lines)}")
    finally:
        process.kill()
        process.wait(10)
