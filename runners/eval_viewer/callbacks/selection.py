"""Which datapoint is open: a clicked table row or grid cell."""

from __future__ import annotations

from typing import Optional

from dash import Dash, Input, Output, ctx, no_update

from runners.eval_viewer.backend.viewer import ViewerBackend
from runners.eval_viewer.layout import ids


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(ids.SELECTED, "data"), Input(ids.TABLE, "active_cell"), Input(ids.SCORE_GRID, "clickData"),
                  prevent_initial_call=True)
    def select_datapoint(active_cell: Optional[dict], click: Optional[dict]) -> object:
        idx = _from_table(active_cell) if ctx.triggered_id == ids.TABLE else _from_grid(click)
        return no_update if idx is None else idx


def _from_table(active_cell: Optional[dict]) -> Optional[int]:
    return (active_cell or {}).get("row_id")


def _from_grid(click: Optional[dict]) -> Optional[int]:
    points = (click or {}).get("points") or [{}]
    return points[0].get("customdata")
