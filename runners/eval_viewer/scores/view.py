"""The score chart and the score grid as the first page shows them: their data comes with the page, and the page's
script draws them in its first render (``assets/score_views.js``), without a round of callbacks."""

from __future__ import annotations

from dash import dcc, html

from runners.eval_viewer.scores.data import grid_view, history_view
from runners.eval_viewer.scores.ids import (
    SCORE_CHART,
    SCORE_CHART_DATA,
    SCORE_GRID,
    SCORE_GRID_DATA,
    SCORE_GRID_FILTERS,
    SCORES_MESSAGE,
)
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.first_view import FirstView
from runners.eval_viewer.table.view import filter_model


def score_chart(backend: ViewerBackend, page: FirstView) -> list:
    """The chart of the metric over the run's epochs."""
    return [html.Div(id=SCORE_CHART, className="score-chart"),
            dcc.Store(id=SCORE_CHART_DATA, data=history_view(backend, page.run, page.view.metric, page.epoch))]


def score_grid(backend: ViewerBackend, page: FirstView) -> tuple[html.Div, list]:
    """The grid of the datapoints the table shows, and the message about them (shown above the table)."""
    filters = filter_model(page.filters)
    grid, message = grid_view(backend, page.view.query, filters)
    return html.Div(message, id=SCORES_MESSAGE), [
        html.Div(id=SCORE_GRID, className="score-grid"), dcc.Store(id=SCORE_GRID_DATA, data=grid),
        dcc.Store(id=SCORE_GRID_FILTERS, data=filters)]
