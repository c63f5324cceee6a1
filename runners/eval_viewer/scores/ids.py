"""Ids of the score chart and the score grid, and what the browser sends them."""

from runners.eval_viewer.shared.sends import Sends, record

SCORE_CHART = "score-chart"  # drawn by assets/score_views.js from SCORE_CHART_DATA
SCORE_CHART_DATA = "score-chart-data"
SCORE_GRID = "score-grid"  # drawn by assets/score_views.js from SCORE_GRID_DATA (and the open datapoint's mark)
SCORE_GRID_DATA = "score-grid-data"
SCORE_GRID_FILTERS = "score-grid-filters"  # the table's typed filters the grid is drawn for (its filter model)
SCORES_MESSAGE = "scores-message"

SENDS: Sends = {(SCORE_GRID_FILTERS, "data"): record()}  # AG Grid's filter model, checked as the table's (``paging``)
