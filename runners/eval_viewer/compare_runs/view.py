"""Run against run, in the Compare runs tab: the two chosen epochs joined by idx (``data.py``).

A summary line (``37 flipped to wrong, 52 to right; ...``), one-click filters for the flips, and a table of
every datapoint with both predictions, the metric on both sides and its change, sortable and filterable like
the datapoint table; a click on a row opens that datapoint in both runs below it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import dash_ag_grid as dag
import dash_bootstrap_components as dbc
import numpy as np
from dash import dcc, html

from run_dir.names import ITEM_KEYS
from runners.eval_viewer.compare_epochs.display_compare import compare_column, display_compare
from runners.eval_viewer.compare_runs.data import RIGHT_TO_WRONG, WRONG_TO_RIGHT, RunDiff, Side, diffs_of, sides_of
from runners.eval_viewer.compare_runs.ids import (
    COMPARE_RUN_EPOCH_SELECT,
    COMPARE_RUN_SELECT,
    COMPARE_RUNS_DRAWN,
    COMPARE_RUNS_PANEL,
    COMPARE_RUNS_SHOWN,
    COMPARE_RUNS_STATUS,
    RUN_DIFF_ALL,
    RUN_DIFF_CAPTION,
    RUN_DIFF_QUERY,
    RUN_DIFF_ROWS,
    RUN_DIFF_SHOWN,
    RUN_DIFF_SUMMARY,
    RUN_DIFF_TABLE,
    RUN_DIFF_TO_RIGHT,
    RUN_DIFF_TO_WRONG,
    TAB_COMPARE_RUNS,
)
from runners.eval_viewer.controls.data import epoch_option, run_options
from runners.eval_viewer.datapoint.display_datapoint import display_summary, section
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import BadRequest
from runners.eval_viewer.shared.components import NOTHING_OPEN, message, tab_of
from runners.eval_viewer.shared.datapoint import load_datapoint
from runners.eval_viewer.shared.first_view import FirstView
from runners.eval_viewer.shared.pending import pending_status
from runners.eval_viewer.shared.row_grids import ONE_REQUEST_AT_A_TIME
from runners.eval_viewer.shared.runs import Epoch, last_modified
from runners.eval_viewer.shared.table import TABLE_ERRORS
from runners.eval_viewer.table.view import CLASS_NAME_FORMAT, LABEL_WIDTH, typed_filter
from utils.errors import LanternUserError

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
        dbc.Button("all", id=RUN_DIFF_ALL, size="sm", outline=True, color="secondary"),
        dbc.Button(f"flipped {RIGHT_TO_WRONG}", id=RUN_DIFF_TO_WRONG, size="sm", outline=True, color="danger"),
        dbc.Button(f"flipped {WRONG_TO_RIGHT}", id=RUN_DIFF_TO_RIGHT, size="sm", outline=True, color="success"),
    ], size="sm")
    table = dag.AgGrid(
        id=RUN_DIFF_TABLE, rowModelType="infinite", columnDefs=view.columns, getRowId="'' + params.data.idx",
        defaultColDef={"sortable": True, "filter": True, "floatingFilter": True, "resizable": True, "minWidth": 90,
                       "flex": 1, "filterParams": {"maxNumConditions": 1, "buttons": ["reset"]}},
        dashGridOptions={"cacheBlockSize": 100, "maxBlocksInCache": 10, **ONE_REQUEST_AT_A_TIME,
                         "suppressCellFocus": True, "rowHeight": 28, "headerHeight": 30},
        className="ag-theme-alpine", style={"height": "300px", "width": "100%"})
    return html.Div([
        dbc.Alert(view.summary, id=RUN_DIFF_SUMMARY, color=view.color, class_name="run-diff-summary"),
        html.Div([buttons, html.Span(id=RUN_DIFF_CAPTION, className="hint")], className="navigation"),
        table, dcc.Store(id=RUN_DIFF_ROWS),
        dcc.Store(id=RUN_DIFF_SHOWN, **({} if view.shown is None else {"data": view.shown})),
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


def joined(backend: ViewerBackend, shown: dict) -> JoinView:
    """The two sides ``shown`` names (``{'first': {'run', 'epoch'}, 'second': ..., 'metric'}``) joined: the query
    the joined table's rows are served for, its columns and the summary line (or why there is none)."""
    sides = sides_of(backend, shown)
    if sides is None:
        return JoinView()
    try:
        diff = diffs_of(backend).diff(*sides, shown.get("metric"))
    except (*TABLE_ERRORS, LanternUserError, BadRequest) as exc:
        return JoinView(summary=str(exc), color="warning")
    classes = {**backend.class_names(sides[1].epoch), **backend.class_names(sides[0].epoch)}
    return JoinView({"first": shown["first"], "second": shown["second"], "metric": diff.metric},
                    diff_columns(diff, classes), summary(diff), "info", shown)


def first_run_diff(backend: ViewerBackend, first: FirstView, other: Optional[str],
                   other_epoch: Optional[str]) -> JoinView:
    """Run against run as the first page shows it: joined only when Compare runs is the tab it opens on with a
    second run chosen (an address's), so no callback is needed for it."""
    if first.tab != TAB_COMPARE_RUNS or other is None:
        return JoinView()
    return joined(backend, {"first": {"run": first.run, "epoch": first.epoch},
                            "second": {"run": other, "epoch": other_epoch}, "metric": first.view.metric})


def rows_caption(diff: RunDiff, count: int, request: dict) -> str:
    total = diff.table.count()
    sort = (request.get("sortModel") or [{}])[0]
    order = f", sorted by {column_title(sort['colId'], diff.metric)} " \
            f"({'highest' if sort.get('sort') == 'desc' else 'lowest'} first)" if sort.get("colId") else ""
    matching = f"{count} of {total} datapoints match the filters" if count < total else f"{total} datapoints"
    return f"{matching}{order}; click one to open it in both below."


def run_columns(backend: ViewerBackend, sides: list[Side], idx: int) -> html.Div:
    """The datapoint ``idx`` in each side: its inputs, labels and meta info once (again for a side whose
    captured datapoint differs: another validation set), then each side's badges and Debug Outputs as aligned
    rows."""
    datapoints = [load_datapoint(backend, side.run, side.epoch, idx) for side in sides]
    columns = [compare_column(datapoint, side.name) for side, datapoint in zip(sides, datapoints)]
    present = [(side, datapoint) for side, datapoint in zip(sides, datapoints) if not datapoint.get("missing")]
    shown = [(side, datapoint) for i, (side, datapoint) in enumerate(present)
             if i == 0 or not same_item(datapoint, present[0][1])]
    title = html.H5(f"datapoint {idx} · " + " and ".join(side.name for side in sides), className="datapoint-title")
    summaries = [html.Div([html.H6(f"as {side.run.name} captured it"), display_summary(datapoint)])
                 if len(shown) > 1 else display_summary(datapoint) for side, datapoint in shown]
    missing = [message(datapoint["missing"], "secondary") for datapoint in datapoints if datapoint.get("missing")]
    return html.Div([title, *missing, *summaries, section("Debug Outputs", display_compare(columns))])


def same_item(first: dict, second: dict) -> bool:
    """Whether two sides captured the same inputs, labels and meta info (the same validation set)."""
    return all(_same(first.get(part), second.get(part)) for part in ITEM_KEYS)


def _same(a: object, b: object) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b, equal_nan=a.dtype.kind
                                                                                              in "fc")
    return type(a) is type(b) and a == b


def other_run_epochs(backend: ViewerBackend, other_path: Optional[str], epoch_key: Optional[str],
                     run_path: Optional[str], wanted: Optional[str] = None) -> tuple[list, Any]:
    """The second run's epochs as options, and the one chosen: ``wanted`` (an address's) where the run has it, else
    its epoch with debug outputs nearest to the open ``epoch_key`` (the earlier on a tie; for the run itself, another
    than the open one), so both columns have Debug Outputs to compare; else, where it kept none, the nearest epoch."""
    other, run = backend.run(other_path), backend.run(run_path)
    epochs = backend.epochs(other) if other else []
    options = [epoch_option(e) for e in epochs]
    same_run = other_path == run_path
    if wanted in {e.key for e in epochs} and not (same_run and wanted == epoch_key):
        return options, wanted
    candidates = [e for e in epochs if not (same_run and e.key == epoch_key)]
    opened = backend.epoch(run, epoch_key) if run else None
    return options, _nearest([e for e in candidates if e.has_debug] or candidates, opened.number if opened else None)


def _nearest(epochs: list[Epoch], number: Optional[int]) -> Optional[str]:
    """The key of the epoch of ``epochs`` nearest to epoch ``number``, the earlier on a tie (the last without a
    number: an evaluator's)."""
    if not epochs:
        return None
    if number is None:
        return epochs[-1].key
    return min(epochs, key=lambda e: (math.inf, False) if e.number is None else (abs(e.number - number),
                                                                                  e.number > number)).key


def second_run(backend: ViewerBackend, run_path: Optional[str]) -> Optional[str]:
    """The run Compare runs opens on beside ``run_path``: the run made from the same config file written to last (a
    rerun, another seed), else the run itself where it has another epoch, else none."""
    run = backend.run(run_path)
    if run is None:
        return None
    twins = [other for other in backend.discovery.runs.values()
             if other.path != run.path and run.config_filepath and other.config_filepath == run.config_filepath]
    if twins:
        return max(twins, key=last_modified).path
    return run.path if len(backend.epochs(run)) > 1 else None


def other_run_options(options: Optional[list], run_path: Optional[str]) -> list:
    """The runs to compare the chosen one with: every run, the chosen one first (another of its epochs)."""
    own = [{**option, "label": f"this run: {option['label']}"} for option in options or []
           if option["value"] == run_path]
    return own + [option for option in options or [] if option["value"] != run_path]


def compare_runs_tab(backend: ViewerBackend, first: FirstView) -> dcc.Tab:
    """The tab as the first page shows it: the second run and its epoch chosen (an address's, else ``second_run``),
    the two joined when it is the tab the page opens on; the datapoint in both is drawn once the tab is shown."""
    options = other_run_options(run_options(backend.discovery), first.run)
    asked = first.compare.get("run")
    other = asked if asked in {o["value"] for o in options} else second_run(backend, first.run)
    epochs, other_epoch = other_run_epochs(backend, other, first.epoch, first.run, first.compare.get("epoch"))
    return tab_of("Compare runs", TAB_COMPARE_RUNS, [
        html.Div([
            html.Div([html.Label("Second run"), dcc.Dropdown(id=COMPARE_RUN_SELECT, options=options, value=other)],
                     className="control", style={"width": "60%"}),
            html.Div([html.Label("Its epoch"), dcc.Dropdown(id=COMPARE_RUN_EPOCH_SELECT, options=epochs,
                                                            value=other_epoch)],
                     className="control", style={"width": "30%"}),
        ], className="controls"),
        run_diff_section(first_run_diff(backend, first, other, other_epoch)),
        dcc.Store(id=COMPARE_RUNS_SHOWN),
        *pending_status(COMPARE_RUNS_STATUS, COMPARE_RUNS_DRAWN, first.idx),
        html.Div(NOTHING_OPEN, id=COMPARE_RUNS_PANEL, className="compare-panel"),
    ])
