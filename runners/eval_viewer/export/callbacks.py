"""The Export button: the table's filtered datapoints, in its order, as the self-contained HTML report of
``runners.eval_viewer.export``, downloaded by the browser. The report says which filters, narrowing and sort
chose its datapoints (and keeps them as JSON), so it can be read, and the view rebuilt, later."""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from typing import Any, Optional

from dash import Dash, Input, Output, State, dcc, no_update

from runners.eval_viewer.export.ids import EXPORT_BUTTON, EXPORT_DOWNLOAD, SENDS
from runners.eval_viewer.export.report import Selection, export_report
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import BadRequest, Paging, paging
from runners.eval_viewer.shared.feature import Feature
from runners.eval_viewer.shared.table import TABLE_ERRORS, class_text
from runners.eval_viewer.table.data import table_of, table_rows, where_of
from runners.eval_viewer.table.filter_text import LABEL_COLUMNS
from runners.eval_viewer.table.ids import TABLE, TABLE_CAPTION, TABLE_QUERY
from utils.errors import LanternUserError

# Each datapoint costs the report ~26 kB (the default example's figures, maps as images) and the export the drawing
# of its figures (0.13 s at load 8 to 0.65 s at load 14, benchmarks/export_report.py): 500 make a ~13 MB report
# that opens in seconds, written in one to five minutes. A larger filtered set is cut to its first rows, and the
# caption says so.
MAX_EXPORT = 500


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(EXPORT_DOWNLOAD, "data"), Output(TABLE_CAPTION, "children", allow_duplicate=True),
                  Input(EXPORT_BUTTON, "n_clicks"), State(TABLE_QUERY, "data"),
                  State(TABLE, "getRowsRequest"), prevent_initial_call=True)
    def export_rows(_: Optional[int], query: Optional[dict], request: Optional[dict]) -> tuple:
        query = query or {}
        try:
            epoch, table = table_of(backend, query.get("run"), query.get("epoch"))
            asked = replace(paging(request or {}), start=0, end=MAX_EXPORT)
            rows, count, total, _ = table_rows(backend, query, asked)
            selection = describe_selection(backend, epoch, table, query, asked, count, total) if epoch else None
        except (*TABLE_ERRORS, BadRequest) as exc:
            return no_update, f"nothing exported: {exc}"
        if epoch is None or not rows:
            return no_update, "nothing exported: the table shows no datapoint"
        run = backend.run(query["run"])
        with tempfile.TemporaryDirectory() as folder:
            out = os.path.join(folder, "report.html")
            try:
                export_report(run.path, [row["idx"] for row in rows], out, epoch.number, backend=backend,
                              selection=selection)
            except LanternUserError as exc:
                return no_update, f"nothing exported: {exc}"
            name = f"lantern_{os.path.basename(run.path)}_{epoch.key}.html"
            download = dcc.send_file(out, filename=name)
        left_out = f" (the first {MAX_EXPORT} of {count}: narrow the filters for the rest)" if count > MAX_EXPORT \
            else ""
        return download, f"{epoch.label}: exported {len(rows)} datapoints{left_out} to {name}."


def describe_selection(backend: ViewerBackend, epoch: Any, table: Any, query: dict, asked: Paging, count: int,
                       total: int) -> Selection:
    """The table's filters, narrowing and sort in words (``37 of 500 datapoints of epoch 2 where cross_entropy > 2
    and label is ring (4), sorted by cross_entropy (highest first)``) and as a record."""
    classes = backend.class_names(epoch)
    filters = [_condition(*condition, classes=classes)
               for condition in where_of(asked.filter_model, dict(table.columns()), classes)]
    narrowed = query.get("idx")
    if narrowed is not None:
        filters.append(f"idx among the {len(narrowed)} datapoints a Failures finding chose")
    if query.get("wrong"):
        filters.append("label differs from prediction (wrong only)")
    order = f", sorted by {asked.sort} ({'highest' if asked.descending else 'lowest'} first)" if asked.sort \
        else ", in idx order"
    where = f" where {' and '.join(filters)}" if filters else " (no filter)"
    run = backend.run(query.get("run"))
    record = {"run": run.name if run else None, "epoch": epoch.key, "filter_model": asked.filter_model,
              "narrowed_to_idx": narrowed, "wrong_only": bool(query.get("wrong")), "datapoints": count, "of": total,
              "sort": {"column": asked.sort, "order": "desc" if asked.descending else "asc"} if asked.sort else None}
    return Selection(f"{count} of {total} datapoints of {epoch.label}{where}{order}.", record)


def _condition(column: str, op: str, value: Any = None, classes: Optional[dict[int, str]] = None) -> str:
    if op in ("is null", "is not null"):
        return f"{column} is {'blank' if op == 'is null' else 'not blank'}"
    if column in LABEL_COLUMNS and op in ("in", "not in"):
        names = " or ".join(class_text(v, classes or {}) for v in value) or "no class"
        return f"{column} is {'not ' if op == 'not in' else ''}{names}"
    if op in ("in", "not in"):
        return f"{column} {op} {', '.join(_shown(v) for v in value)}"
    return f"{column} {op} {_shown(value)}"


def _shown(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else repr(value) if isinstance(value, str) else str(value)


FEATURE = Feature(register, SENDS)
