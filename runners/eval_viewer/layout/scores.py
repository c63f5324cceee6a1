"""Score views of the chosen run and epoch: the metric over epochs, the per-datapoint grid and the table."""

from __future__ import annotations

from dash import dash_table, dcc, html

from runners.eval_viewer.layout import ids

TABLE_PAGE_SIZE = 15


def score_views() -> html.Div:
    return html.Div([
        dcc.Graph(id=ids.SCORE_CHART, config={"displaylogo": False}, style={"height": "240px"}),
        html.Div(id=ids.SCORES_MESSAGE),
        dcc.Graph(id=ids.SCORE_GRID, config={"displaylogo": False}, style={"height": "320px"}),
        html.P(id=ids.TABLE_CAPTION, className="hint"),
        dash_table.DataTable(
            id=ids.TABLE, page_size=TABLE_PAGE_SIZE, sort_action="native", filter_action="native",
            style_table={"overflowX": "auto"}, style_cell={"fontSize": "13px", "padding": "4px 8px"},
            style_header={"fontWeight": "bold"}, cell_selectable=True,
        ),
    ], className="score-views")
