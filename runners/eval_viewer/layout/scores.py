"""Score views of the chosen run and epoch: the metric over epochs, the per-datapoint grid and the table.

The table is an AG Grid on the infinite row model: the browser asks for the rows it
shows (sorted and filtered on the server), so an epoch of any size costs the same.
"""

from __future__ import annotations

from typing import Optional

import dash_ag_grid as dag
from dash import dcc, html

from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.callbacks.scores import grid_view, history_view
from runners.eval_viewer.callbacks.table import EpochView
from runners.eval_viewer.layout import ids

TABLE_BLOCK_SIZE = 100  # rows per request; the grid asks for the next block while scrolling
OPEN_ROW_CLASS = "open-datapoint"  # the row of the open datapoint (viewer.css)


def datapoint_table(columns: list[dict], open_idx: Optional[int]) -> dag.AgGrid:
    """The table, its row of the open datapoint marked (``open_idx`` in the grid's context, which
    ``callbacks/selection.py`` keeps up with the open datapoint however it was opened)."""
    return dag.AgGrid(
        id=ids.TABLE, rowModelType="infinite", columnDefs=columns, getRowId="'' + params.data.idx",
        filterModel={},  # as the grid reports it when it mounts: the score grid (which follows it) is not redrawn
        defaultColDef={"sortable": True, "filter": True, "floatingFilter": True, "resizable": True,
                       "minWidth": 90, "flex": 1, "filterParams": {"maxNumConditions": 1, "buttons": ["reset"]}},
        rowClassRules={OPEN_ROW_CLASS: "params.data && params.data.idx === params.context.open"},
        dashGridOptions={"cacheBlockSize": TABLE_BLOCK_SIZE, "maxBlocksInCache": 20, "context": {"open": open_idx},
                         "suppressCellFocus": True, "rowHeight": 28, "headerHeight": 30},
        className="ag-theme-alpine", style={"height": "420px", "width": "100%"},
    )


def score_views(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str],
                first: EpochView, open_idx: Optional[int]) -> html.Div:
    """The chart, the table and the grid of the epoch the page opens on (``first``). The chart's and the grid's
    data come with the page, and the page's script draws them in its first render (``assets/score_views.js``),
    without a round of callbacks."""
    grid, grid_message = grid_view(backend, first.query)
    return html.Div([
        html.Div(id=ids.SCORE_CHART, className="score-chart"),
        dcc.Store(id=ids.SCORE_CHART_DATA, data=history_view(backend, run_path, first.metric, epoch_key)),
        html.Div(grid_message, id=ids.SCORES_MESSAGE),
        html.Div([html.P(id=ids.TABLE_CAPTION, className="hint"),
                  html.Button("Clear filters", id=ids.TABLE_CLEAR_FILTERS, className="small-button")],
                 className="caption-row"),
        datapoint_table(first.columns, open_idx),
        html.Div(id=ids.SCORE_GRID, className="score-grid"),
        dcc.Store(id=ids.SCORE_GRID_DATA, data=grid),
        dcc.Store(id=ids.TABLE_QUERY, data=first.query),
        dcc.Store(id=ids.TABLE_IDX_FILTER),
    ], className="score-views")
