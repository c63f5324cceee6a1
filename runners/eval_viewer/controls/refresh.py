"""What changed on disk: the run list, the chosen run's epochs and the chosen epoch's files.

A run still training grows, so the page looks again every ``layout.controls.REFRESH_MS``. It used to run its
callbacks on a timer (a ``dcc.Interval``), but Dash holds back every callback downstream of one in flight, and
the refresh is upstream of nearly everything (the run list, the epochs, the table's query): on a loaded machine,
where its answers took longer than its period, one was always in flight and a panel asked for by a link was never
drawn. Now the page's script (``assets/refresh.js``) asks ``/_lantern/changes`` outside Dash's callbacks and
ticks ``ids.REFRESH`` only when the answer differs: a page over runs that do not change runs no callback at all.
"""

from __future__ import annotations

from typing import Optional

import flask
from dash import Dash

from runners.eval_viewer.controls.view import run_options
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.components import digest, epoch_state

CHANGES_ROUTE = "_lantern/changes"  # under the app's routes prefix; the page asks it relative to its own address
DISCOVERY_MAX_AGE_S = 2.0  # one look at the log dirs serves every page polling within this time


def disk_state(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str]) -> dict[str, str]:
    """Short signatures of what the page shows from disk: ``runs`` (the run list and discovery problems) and
    ``epoch`` (``epoch_state``). A run or epoch the viewer does not know counts as none: nothing asked here
    becomes a path."""
    discovery = backend.refresh(max_age_s=DISCOVERY_MAX_AGE_S)
    return {"runs": digest((run_options(discovery), discovery.problems)),
            "epoch": epoch_state(backend, run_path, epoch_key)}


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.server.route(f"{app.config.routes_pathname_prefix}{CHANGES_ROUTE}")
    def changes() -> flask.Response:
        return flask.jsonify(disk_state(backend, flask.request.args.get("run"), flask.request.args.get("epoch")))
