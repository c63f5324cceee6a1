"""The Runs tab: a picker of the runs to set side by side (the open run and the most recently written ones first),
their curves overlaid (``figures.curves_figure``), what a run lacks, and a table of their final scores and config
differences, sortable by any column; a click on a row opens that run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import dash_ag_grid as dag
from dash import dcc, html

from runners.eval_viewer.figures.values import GRAPH_CONFIG
from runners.eval_viewer.many_runs.data import MAX_RUNS, config_rows, default_runs, run_curves
from runners.eval_viewer.many_runs.figures import curves_figure
from runners.eval_viewer.many_runs.ids import (
    RUNS_CHOSEN,
    RUNS_CURVES,
    RUNS_NOTE,
    RUNS_TABLE,
    RUNS_TICK,
    TAB_RUNS,
)
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.first_view import FirstView

OPEN_RUN_CLASS = "open-datapoint"  # the open run's row, marked as the table marks the open datapoint's (viewer.css)
ADDRESS_KEY = "runs"  # the runs chosen, as the address holds them (repeated)
HOW = "Click a row to open its run; click a header to sort by it."
SCORE_FORMAT = {"function": "params.value == null ? '' : d3.format('.4~g')(params.value)"}  # config values as given


@dataclass
class RunsContent:
    """Everything the tab shows for the runs chosen (``runs_content``)."""

    note: list
    figure: Any = field(default_factory=dict)
    columns: list[dict] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    chosen: list[str] = field(default_factory=list)


def runs_tab(backend: ViewerBackend, first: FirstView) -> dcc.Tab:
    """The tab, drawn when it is the tab the first page opens on (the runs its address names, else the defaults)."""
    asked = first.address.get(ADDRESS_KEY) or default_runs(backend, first.run)
    content = runs_content(backend, asked) if first.tab == TAB_RUNS else RunsContent([], chosen=asked)
    return dcc.Tab(label="Runs", value=TAB_RUNS, id=TAB_RUNS, children=html.Div([
        html.Label("Runs side by side"),
        dcc.Dropdown(id=RUNS_CHOSEN, options=run_options(backend), value=content.chosen, multi=True,
                     placeholder="choose runs to compare"),
        html.Div(content.note, id=RUNS_NOTE),
        dcc.Graph(id=RUNS_CURVES, figure=content.figure, config=GRAPH_CONFIG),
        html.H5("Final scores and config differences"),
        dag.AgGrid(id=RUNS_TABLE, columnDefs=content.columns, rowData=content.rows,
                   defaultColDef={"sortable": True, "resizable": True, "filter": False, "minWidth": 90},
                   getRowId="params.data.path", rowClassRules={OPEN_RUN_CLASS: "params.data.path === "
                                                                                "params.context.open"},
                   dashGridOptions={"suppressCellFocus": True, "rowHeight": 28, "headerHeight": 30,
                                    "domLayout": "autoHeight", "suppressFieldDotNotation": True,
                                    "context": {"open": first.run}},
                   className="ag-theme-alpine runs-table", style={"width": "100%"}),
        dcc.Store(id=RUNS_TICK),
    ], className="tab-body"))


def run_options(backend: ViewerBackend) -> list[dict]:
    """Every run found, by name."""
    return [{"label": run.name, "value": path}
            for path, run in sorted(backend.discovery.runs.items(), key=lambda item: item[1].name)]


def runs_content(backend: ViewerBackend, chosen: Optional[list[str]]) -> RunsContent:
    """The curves and table of the ``chosen`` runs (those the viewer knows, at most ``MAX_RUNS``)."""
    runs = [backend.run(path) for path in (chosen or [])]
    runs = [run for run in runs if run is not None][:MAX_RUNS]
    if not runs:
        return RunsContent([html.P("Choose runs above to set them side by side.", className="hint")])
    curves = [run_curves(backend, run) for run in runs]
    scores, differing, rows = config_rows(curves)
    said = f"{len(runs)} runs; they differ in {len(differing)} config values" if len(runs) > 1 else "1 run"
    note = [html.P(f"{said}. {HOW}", className="hint"),
            *[html.P(problem, className="hint") for found in curves for problem in found.problems]]
    columns = [{"field": "run", "headerName": "run", "pinned": "left", "minWidth": 160},
               {"field": "epochs", "headerName": "epochs", "maxWidth": 100},
               *[{"field": name, "headerName": name, "valueFormatter": SCORE_FORMAT} for name in scores],
               *[{"field": path, "headerName": path, "headerTooltip": path} for path in differing]]
    return RunsContent(note, curves_figure(curves), columns, rows, [run.path for run in runs])
