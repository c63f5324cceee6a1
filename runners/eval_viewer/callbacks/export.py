"""The Export button: the table's filtered datapoints (in its order, at most ``MAX_EXPORT``) as the
self-contained HTML report of ``runners.eval_viewer.export``, downloaded by the browser."""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from typing import Optional

from dash import Dash, Input, Output, State, dcc, no_update

from runners.eval_viewer.backend.table import TABLE_ERRORS
from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.callbacks.browser_input import BadRequest, paging
from runners.eval_viewer.callbacks.table import table_of, table_rows
from runners.eval_viewer.export import export_report
from runners.eval_viewer.layout import ids
from utils.errors import LanternUserError

MAX_EXPORT = 50  # figures of every debugger per datapoint: a larger report gets slow to open


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(ids.EXPORT_DOWNLOAD, "data"), Output(ids.TABLE_CAPTION, "children", allow_duplicate=True),
                  Input(ids.EXPORT_BUTTON, "n_clicks"), State(ids.TABLE_QUERY, "data"),
                  State(ids.TABLE, "getRowsRequest"), prevent_initial_call=True)
    def export_rows(_: Optional[int], query: Optional[dict], request: Optional[dict]) -> tuple:
        try:
            epoch, _table = table_of(backend, (query or {}).get("run"), (query or {}).get("epoch"))
            asked = replace(paging(request or {}), start=0, end=MAX_EXPORT)
            rows, count, _, _ = table_rows(backend, query or {}, asked)
        except (*TABLE_ERRORS, BadRequest) as exc:
            return no_update, f"nothing exported: {exc}"
        if epoch is None or not rows:
            return no_update, "nothing exported: the table shows no datapoint"
        run = backend.run(query["run"])
        with tempfile.TemporaryDirectory() as folder:
            out = os.path.join(folder, "report.html")
            try:
                export_report(run.path, [row["idx"] for row in rows], out, epoch.number, backend=backend)
            except LanternUserError as exc:
                return no_update, f"nothing exported: {exc}"
            name = f"lantern_{os.path.basename(run.path)}_{epoch.key}.html"
            download = dcc.send_file(out, filename=name)
        left_out = f" (the first {MAX_EXPORT} of {count})" if count > MAX_EXPORT else ""
        return download, f"{epoch.label}: exported {len(rows)} datapoints{left_out} to {name}."
