"""Score views of the chosen run and epoch: the metric over epochs, the per-datapoint grid and the table.

The table is an AG Grid on the infinite row model: the browser asks for the rows it
shows (sorted and filtered on the server), so an epoch of any size costs the same.
"""

from __future__ import annotations

from typing import Optional

import dash_ag_grid as dag
from dash import dcc, html

from runners.eval_viewer.scores.data import grid_view, history_view
from runners.eval_viewer.shared import ids
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.first_view import FirstView
from runners.eval_viewer.table.filters import WRONG

TABLE_BLOCK_SIZE = 100  # rows per request; the grid asks for the next block while scrolling
OPEN_ROW_CLASS = "open-datapoint"  # the row of the open datapoint (viewer.css)


def filter_model(filters: Optional[dict[str, str]]) -> dict:
    """The table's filter model (AG Grid's) for the text typed in its boxes (column -> text)."""
    return {column: {"filterType": "text", "type": "contains", "filter": text} for column, text in
            (filters or {}).items()}


def datapoint_table(columns: list[dict], open_idx: Optional[int],
                    filters: Optional[dict[str, str]] = None) -> dag.AgGrid:
    """The table, its row of the open datapoint marked (``open_idx`` in the grid's context, which
    ``callbacks/selection.py`` keeps up with the open datapoint however it was opened), its boxes holding
    ``filters`` (column -> typed text, from the address)."""
    model = filter_model(filters)
    return dag.AgGrid(
        id=ids.TABLE, rowModelType="infinite", columnDefs=columns, getRowId="'' + params.data.idx",
        **({"filterModel": model} if model else {}),
        defaultColDef={"sortable": True, "filter": True, "floatingFilter": True, "resizable": True,
                       "minWidth": 90, "flex": 1, "filterParams": {"maxNumConditions": 1, "buttons": ["reset"]}},
        rowClassRules={OPEN_ROW_CLASS: "params.data && params.data.idx === params.context.open"},
        dashGridOptions={"cacheBlockSize": TABLE_BLOCK_SIZE, "maxBlocksInCache": 20, "context": {"open": open_idx},
                         "suppressCellFocus": True, "rowHeight": 28, "headerHeight": 30,
                         # a debugger summary's column is named 'layer3_stats.mean': a field, not a nested path
                         "suppressFieldDotNotation": True},
        className="ag-theme-alpine", style={"height": "420px", "width": "100%"},
    )


def column_chooser(columns: list[dict], pinned: list[str], hidden: list[str]) -> html.Details:
    """Which columns the table shows, and which are pinned to its left (they stay while it scrolls sideways); the
    first page's ``columns`` come marked so (``pinned_and_hidden``)."""
    names = [column["field"] for column in columns if column.get("field")]
    return html.Details([
        html.Summary("Columns", className="small-button"),
        html.Div([dcc.Dropdown(id=ids.COLUMNS_PINNED, options=names, value=pinned, multi=True,
                               placeholder="pin columns to the left"),
                  dcc.Checklist(id=ids.COLUMNS_SHOWN, options=names, value=[n for n in names if n not in hidden],
                                className="column-list")],
                 className="column-chooser")], className="columns")


def pinned_and_hidden(columns: list[dict], pinned: list[str], hidden: list[str]) -> list[dict]:
    """``columns`` with those named pinned to the left and hidden."""
    return [{**column, **({"pinned": "left"} if column.get("field") in pinned else {}),
             **({"hide": True} if column.get("field") in hidden else {})} for column in columns]


def score_views(backend: ViewerBackend, page: FirstView) -> html.Div:
    """The chart, the table and the grid of the epoch the page opens on (``page``). The chart's and the grid's
    data come with the page, and the page's script draws them in its first render (``assets/score_views.js``),
    without a round of callbacks."""
    first = page.view
    grid, grid_message = grid_view(backend, first.query, filter_model(page.filters))
    run_path, epoch_key, open_idx = page.run, page.epoch, page.idx
    return html.Div([
        html.Div(id=ids.SCORE_CHART, className="score-chart"),
        dcc.Store(id=ids.SCORE_CHART_DATA, data=history_view(backend, run_path, first.metric, epoch_key)),
        html.Div(grid_message, id=ids.SCORES_MESSAGE),
        html.Div([html.P(id=ids.TABLE_CAPTION, className="hint"),
                  html.Div([dcc.Checklist(id=ids.WRONG_ONLY, options=[{"label": "wrong only", "value": WRONG}],
                                          value=[WRONG] if first.query.get("wrong") else [], inline=True),
                            column_chooser(first.columns, page.pinned, page.hidden),
                            html.Button("Clear filters", id=ids.TABLE_CLEAR_FILTERS, className="small-button")],
                           className="table-tools")],
                 className="caption-row"),
        html.Div(id=ids.FILTER_CHIPS, className="filter-chips"),
        datapoint_table(pinned_and_hidden(first.columns, page.pinned, page.hidden), open_idx, page.filters),
        html.Div(id=ids.SCORE_GRID, className="score-grid"),
        dcc.Store(id=ids.SCORE_GRID_DATA, data=grid),
        dcc.Store(id=ids.SCORE_GRID_FILTERS, data=filter_model(page.filters)),
        dcc.Store(id=ids.TABLE_QUERY, data=first.query),
        dcc.Store(id=ids.TABLE_IDX_FILTER, **({"data": page.narrowing} if page.narrowing else {})),
    ], className="score-views")
