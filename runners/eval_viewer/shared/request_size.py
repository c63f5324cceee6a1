"""Every request's body bounded in bytes before it is read, on every route the viewer serves.

A body is only ever read whole (Dash parses a callback's JSON at once), so without a cap any local process, or
anyone on the network under ``--host``, could make the viewer hold gigabytes: a 1000 MB body was read whole (+3.0
GB). A body of ``MAX_REQUEST_BYTES`` or more is answered 413: one whose ``Content-Length`` says so before any of it
is read (the server then closes the connection, never draining it); a chunked one, whose length is known only as it
comes, once that many bytes have come (Flask's ``MAX_CONTENT_LENGTH`` stops the read there).
"""

from __future__ import annotations

from typing import Optional

import flask

MIB = 1024 * 1024
# The page's requests are a few KB (at most 1.6 KB over the browser tests), except a finding's narrowing, which
# carries its datapoints' idx: 6.9 MB for every datapoint of a 1M-row epoch. Four times that, and no more: a
# body is held about three times over while Dash parses it.
MAX_REQUEST_BYTES = 32 * MIB


def cap_request_size(server: flask.Flask, limit: int = MAX_REQUEST_BYTES) -> None:
    """Answer 413 to a request body of ``limit`` bytes or more, for every route; register before any other check."""
    server.config["MAX_CONTENT_LENGTH"] = limit

    @server.before_request
    def refuse_large() -> Optional[flask.Response]:
        length = flask.request.content_length
        if length is None and "chunked" in flask.request.headers.get("Transfer-Encoding", "").lower():
            length = len(flask.request.get_data(cache=True))  # at most ``limit`` bytes, kept for the route
        if length is None or length < limit:
            return None
        return flask.Response(f"request body of {length} bytes or more refused: the viewer takes less than {limit} "
                              "bytes\n", status=413, mimetype="text/plain")
