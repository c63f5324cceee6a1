"""A request too large is refused with HTTP 413 before it is read, on every route the viewer serves.

Before: a 1000 MB body sent to the callback endpoint was read whole (204 after 37.6 s, the viewer +3.0 GB). Here
the client claims 1000 MB and sends 1 MB of it: the 413 comes back while the rest was never sent, so the server
cannot have read it; a chunked body (length unknown) is cut once it passes the cap.
"""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import numpy as np
import pytest

from runners.eval_viewer.address.ids import SAVE_VIEW_ASKED, SAVED_VIEWS, VIEW_NOTE
from runners.eval_viewer.controls.ids import RUN_SELECT
from runners.eval_viewer.shared.request_size import MAX_REQUEST_BYTES
from tests.e2e.synthetic_runs import write_table_run
from tests.reliability.viewer_server import HTTP_WAIT_S, call_callback, serve_viewer

pytestmark = pytest.mark.timeout(120)

CLAIMED = 1000 * 1024 * 1024
SENT = 1024 * 1024
ROUTES = ["/_dash-update-component", "/", "/_dash-layout", "/_dash-dependencies", "/no-such-route"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("request_size") / "logs"
    run = write_table_run(str(folder), "run", np.arange(10.0) % 3, np.arange(10) % 3, np.linspace(0.1, 1.0, 10))
    with serve_viewer([str(folder)], refused=[], views_dir=str(folder.parent / "views")) as url:
        yield url, run


def _status(connection: socket.socket) -> int:
    """The status code of the response on ``connection`` (read until its first line)."""
    answer = b""
    while b"\r\n" not in answer:
        part = connection.recv(4096)
        if not part:
            break
        answer += part
    return int(answer.split(b" ", 2)[1])


def _send(connection: socket.socket, data: bytes) -> bool:
    """Whether all of ``data`` went out before the server closed the connection."""
    try:
        connection.sendall(data)
        return True
    except (BrokenPipeError, ConnectionResetError):
        return False


@pytest.mark.parametrize("route", ROUTES)
def test_a_body_claiming_1000_mb_is_refused_before_it_is_read(served, route):
    address = urlsplit(served[0])
    with socket.create_connection((address.hostname, address.port), timeout=HTTP_WAIT_S) as connection:
        connection.sendall(f"POST {route} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           f"Content-Length: {CLAIMED}\r\n\r\n".encode())
        _send(connection, b"[" * SENT)
        assert _status(connection) == 413  # with 999 MB of the body never sent


def test_a_chunked_body_is_cut_at_the_cap(served):
    address = urlsplit(served[0])
    chunk = b"%x\r\n%s\r\n" % (SENT, b" " * SENT)
    with socket.create_connection((address.hostname, address.port), timeout=HTTP_WAIT_S) as connection:
        connection.sendall(b"POST /_dash-update-component HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           b"Transfer-Encoding: chunked\r\n\r\n")
        sent = 0
        while sent < 4 * MAX_REQUEST_BYTES and _send(connection, chunk):
            sent += SENT
        assert _status(connection) == 413


def test_a_request_under_the_cap_is_answered_as_before(served):
    """A callback padded to just under the cap is read and answered in place (its view name is too long)."""
    url, run = served
    name = "x" * (MAX_REQUEST_BYTES - 4096)
    status, body = call_callback(url, f"{SAVED_VIEWS}.options", {
        f"{SAVE_VIEW_ASKED}.data": {"name": name, "address": f"?run={run}"}, f"{RUN_SELECT}.value": run})
    assert status == 200 and json.loads(body)["response"][VIEW_NOTE]["children"].startswith("not saved: ")
