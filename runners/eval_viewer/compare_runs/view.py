"""Run against run, in the Compare runs tab: the two chosen epochs joined by idx (``backend/run_diff.py``).

A summary line (``37 flipped to wrong, 52 to right; ...``), one-click filters for the flips, and a table of
every datapoint with both predictions, the metric on both sides and its change, sortable and filterable like
the datapoint table; a click on a row opens that datapoint in both runs below it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import dash_ag_grid as dag
import dash_bootstrap_components as dbc
from dash import dcc, html

from runners.eval_viewer.compare_runs.data import RIGHT_TO_WRONG, WRONG_TO_RIGHT, RunDiff
from runners.eval_viewer.shared.ids import RUN_DIFF_QUERY, RUN_DIFF_SHOWN  # ids.py: browser_input checks them
from runners.eval_viewer.table.data import CLASS_NAME_FORMAT, LABEL_WIDTH, typed_filter

SUMMARY = "run-diff-summary"
TABLE = "run-diff-table"
CAPTION = "run-diff-caption"
SHOW_ALL, SHOW_TO_WRONG, SHOW_TO_RIGHT = "run-diff-all", "run-diff-to-wrong", "run-diff-to-right"
CHOOSE = "Pick a second run (or this run, for another of its epochs) and its epoch: the two are joined by idx."
NUMBER = "params.value == null ? 'n/a' : d3.format('.4~g')(params.value)"
CHANGE_CLASSES = {"diff-to-wrong": f"params.value === '{RIGHT_TO_WRONG}'",
                  "diff-to-right": f"params.value === '{WRONG_TO_RIGHT}'"}


@dataclass
class JoinView:
    """What the section shows of two joined epochs: the query its rows are served for (None: nothing joined), its
    columns, the summary line and its colour, and the sides it was joined for (``RUN_DIFF_SHOWN``)."""

    query: Optional[dict] = None
    columns: list = field(default_factory=list)
    summary: Any = CHOOSE
    color: str = "light"
    shown: Optional[dict] = None


def run_diff_section(view: JoinView) -> html.Div:
    """The summary, the flip filters and the joined table (filled once two epochs are chosen: ``view``)."""
    buttons = dbc.ButtonGroup([
        dbc.Button("all", id=SHOW_ALL, size="sm", outline=True, color="secondary"),
        dbc.Button(f"flipped {RIGHT_TO_WRONG}", id=SHOW_TO_WRONG, size="sm", outline=True, color="danger"),
        dbc.Button(f"flipped {WRONG_TO_RIGHT}", id=SHOW_TO_RIGHT, size="sm", outline=True, color="success"),
    ], size="sm")
    table = dag.AgGrid(
        id=TABLE, rowModelType="infinite", columnDefs=view.columns, getRowId="'' + params.data.idx",
        defaultColDef={"sortable": True, "filter": True, "floatingFilter": True, "resizable": True, "minWidth": 90,
                       "flex": 1, "filterParams": {"maxNumConditions": 1, "buttons": ["reset"]}},
        dashGridOptions={"cacheBlockSize": 100, "maxBlocksInCache": 10, "suppressCellFocus": True, "rowHeight": 28,
                         "headerHeight": 30},
        className="ag-theme-alpine", style={"height": "300px", "width": "100%"})
    return html.Div([
        dbc.Alert(view.summary, id=SUMMARY, color=view.color, class_name="run-diff-summary"),
        html.Div([buttons, html.Span(id=CAPTION, className="hint")], className="navigation"),
        table, dcc.Store(id=RUN_DIFF_SHOWN, **({} if view.shown is None else {"data": view.shown})),
        dcc.Store(id=RUN_DIFF_QUERY, **({} if view.query is None else {"data": view.query})),
    ], className="run-diff")


def summary(diff: RunDiff) -> list:
    """The sides named, then what changed between them."""
    return [html.Div([html.Strong("first: "), diff.first.name, html.Strong(" · second: "), diff.second.name],
                     className="run-diff-sides"),
            html.Div(diff.summary(), className="run-diff-line")]


def diff_columns(diff: RunDiff, class_names: dict[int, str]) -> list[dict[str, Any]]:
    """The joined table's columns: idx, the change (coloured), the label and both predictions by class name, the
    metric on both sides and its change, sorted by how much worse it got (the metric's direction). Every box takes
    typed filters, as the datapoint table's do."""
    classes = {"refData": {str(i): f"{name} ({i})" for i, name in class_names.items()},
               "valueFormatter": {"function": CLASS_NAME_FORMAT}} if class_names else {}
    number = {"valueFormatter": {"function": NUMBER}, "minWidth": 90}

    def column(name: str, header: str, tooltip: Optional[str] = None, **more: Any) -> dict[str, Any]:
        return {"field": name, "headerName": header, **typed_filter(name),
                **({"headerTooltip": tooltip} if tooltip else {}), **more}

    return [
        column("idx", "idx", minWidth=80),
        column("change", "change", minWidth=130, cellClassRules=CHANGE_CLASSES),
        column("label", "label", minWidth=LABEL_WIDTH, **classes),
        {"headerName": "prediction", "children": [
            column("prediction_a", "first", diff.first.name, minWidth=LABEL_WIDTH, **classes),
            column("prediction_b", "second", diff.second.name, minWidth=LABEL_WIDTH, **classes)]},
        {"headerName": diff.metric, "children": [
            column("score_a", "first", diff.first.name, **number),
            column("score_b", "second", diff.second.name, **number),
            column("delta", "Δ", f"{diff.metric} of the second − the first",
                   sort="asc" if diff.higher_is_better else "desc", **number)]},
    ]


def column_title(column: str, metric: str) -> str:
    """How a caption names a column of the joined table."""
    return {"prediction_a": "prediction (first)", "prediction_b": "prediction (second)",
            "score_a": f"{metric} (first)", "score_b": f"{metric} (second)", "delta": f"Δ{metric}"}.get(column, column)
