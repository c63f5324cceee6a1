"""The metric over epochs and the per-datapoint score grid.

Both are drawn by the page's own script (``assets/score_views.js``: the chart as SVG, the grid on a
canvas) from data the server sends, so the first page needs no plotly.js (1.2 MB and ~0.3 s of a core to
evaluate and draw): it is loaded once the table has its rows (``assets/plotly_loader.js``). The grid keeps
every datapoint at the same cell in every epoch (idx order) and stays readable at any size: above
``MAX_CELLS`` datapoints each cell holds a bin of consecutive idx and shows its worst value; clicking it
opens that worst datapoint. The open datapoint is marked by the browser. A finding clicked in the Failures
tab (``TABLE_IDX_FILTER``) narrows the grid to its datapoints, as it narrows the table.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import plotly.colors
from dash import html

from analysis.epoch_table import Filter
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import BadRequest, paging
from runners.eval_viewer.shared.components import message
from runners.eval_viewer.shared.runs import Run
from runners.eval_viewer.shared.table import TABLE_ERRORS, Table
from runners.eval_viewer.table.data import table_of, table_where

MAX_CELLS = 10_000  # at most 100 x 100 cells, whatever the number of datapoints


def history_view(backend: ViewerBackend, run_path: Optional[str], metric: Optional[str],
                 epoch_key: Optional[str]) -> dict:
    """The score chart of a run and metric (the first page's, and after every switch)."""
    run = backend.run(run_path)
    return history_data(backend, run, metric, epoch_key) if run and metric else {"title": "no scores yet"}


def grid_view(backend: ViewerBackend, query: Optional[dict],
              filter_model: Optional[dict] = None) -> tuple[dict, Optional[html.Div]]:
    """The score grid of the datapoints the table shows (its query and filters) and the message shown above it
    (the first page's, and after every switch or filter). Filters that name a column the epoch lacks are those of
    the epoch before a switch, about to be cleared: the grid shows the whole epoch meanwhile."""
    query = query or {}
    run_path, epoch_key, metric = query.get("run"), query.get("epoch"), query.get("metric")
    try:
        epoch, table = table_of(backend, run_path, epoch_key)
    except TABLE_ERRORS as exc:
        return {"title": "no scores"}, message(str(exc), "warning")
    if table is not None and "problem" in table.roles:
        return {"title": "no scores"}, message(table.roles["problem"], "warning")
    if table is None or metric not in dict(table.columns()):
        return {"title": "no per-datapoint scores"}, None
    higher_is_better = backend.higher_is_better(epoch, metric)
    try:
        where = table_where(backend, epoch, table, query, paging({"filterModel": filter_model}).filter_model)
    except (*TABLE_ERRORS, BadRequest):  # the table's caption says why; the grid shows what the query narrows to
        where = table_where(backend, epoch, table, query, {})
    try:
        return grid_data(table, metric, higher_is_better, where), None
    except TABLE_ERRORS:
        return grid_data(table, metric, higher_is_better, table_where(backend, epoch, table, query, {})), None


def history_data(backend: ViewerBackend, run: Run, metric: str, epoch_key: Optional[str]) -> dict:
    """Aggregated ``metric`` per epoch (``y``, None where an epoch has none), which epochs have debug outputs
    (drawn as diamonds), the chosen epoch (a dotted line) and the y-axis range."""
    epochs = [e for e in backend.epochs(run) if e.scores_path]
    points = [(e, _aggregated(backend, e, metric)) for e in epochs]
    values = [v for _, v in points if v is not None]
    return {"title": f"{metric} over epochs (◆ debug outputs)", "x": [e.label for e, _ in points],
            "y": [v for _, v in points], "debug": [e.has_debug for e, _ in points],
            "chosen": next((e.label for e, _ in points if e.key == epoch_key), None),
            "range": _padded_range(values) if values else None}


def _padded_range(values: list[float]) -> list[float]:
    """The values' span with 10 % air; a single value gets a small band around it, not plotly's ±1."""
    low, high = min(values), max(values)
    pad = (high - low) * 0.1 or max(abs(high) * 0.05, 0.01)
    return [low - pad, high + pad]


def _aggregated(backend: ViewerBackend, epoch, metric: str) -> Optional[float]:
    try:
        value = backend.aggregated(epoch).get(metric)
    except TABLE_ERRORS:
        return None
    return None if value is None or not math.isfinite(value) else value


def grid_shape(count: int) -> tuple[int, int, int]:
    """``(bin, columns, rows)``: datapoints per cell and the grid's size for ``count`` datapoints."""
    bin_size = max(1, math.ceil(count / MAX_CELLS))
    cells = math.ceil(count / bin_size)
    width = max(1, math.ceil(math.sqrt(cells)))
    return bin_size, width, max(1, math.ceil(cells / width))


def grid_data(table: Table, metric: str, higher_is_better: bool, where: Optional[Filter] = None) -> dict:
    """The score grid as ``assets/score_views.js`` draws it: cells in idx order, row by row, each with its value
    (``values``, 4 significant digits, None where missing) and the idx a click opens (``idx``, -1 past the last
    datapoint); above ``MAX_CELLS`` datapoints a cell is a bin of consecutive idx (``first``..``last``) showing
    and opening its worst. Red is bad whatever the metric's direction; the colour bar's title says so, and a note
    says what grey (no value) means. ``where`` narrows the grid to the datapoints the table shows (its filters,
    a finding's)."""
    columns = table.values(["idx", metric], where=where)
    idx, values = columns["idx"], columns[metric].astype(np.float64)
    if not len(idx):
        return {"title": "none of the chosen datapoints is in this epoch"}
    bin_size, width, height = grid_shape(len(idx))
    starts = np.arange(width * height) * bin_size
    padded = np.full(width * height * bin_size, np.nan)
    padded[:len(values)] = values
    badness = padded if not higher_is_better else -padded
    worst = np.where(np.isnan(badness), np.inf, badness).reshape(-1, bin_size).argmax(axis=1)  # missing: the worst
    inside = starts < len(idx)
    cell_values = np.where(inside, padded.reshape(-1, bin_size)[np.arange(len(starts)), worst], np.nan)
    cell_idx = np.where(inside, idx[np.minimum(starts + worst, len(idx) - 1)], -1)
    per_cell = f", worst of {bin_size} per cell" if bin_size > 1 else ""
    chosen = (f"of the {len(idx)} datapoints the table shows" if len(idx) != 1 else "of the datapoint the table "
              "shows") if where else "per datapoint"
    scale = plotly.colors.get_colorscale("RdYlGn" if higher_is_better else "RdYlGn_r")
    data = {"title": f"{metric} {chosen}, idx order{per_cell} (click a cell)", "metric": metric,
            "colorbar": f"{metric} ({'higher' if higher_is_better else 'lower'} is better)",
            "missing": missing_note(metric, int(np.isnan(values).sum()), bin_size),
            "columns": width, "rows": height, "gap": width < 60, "idx": cell_idx,
            "values": significant(cell_values),
            "colorscale": [[position, list(plotly.colors.unlabel_rgb(colour))] for position, colour in scale]}
    if bin_size > 1:
        data["first"] = np.where(inside, idx[np.minimum(starts, len(idx) - 1)], -1)
        data["last"] = np.where(inside, idx[np.minimum(starts + bin_size, len(idx)) - 1], -1)
    return data


def significant(values: np.ndarray, digits: int = 4) -> np.ndarray:
    """``values`` as ``float(f"{v:.4g}")`` gives them (``digits`` significant digits; NaN stays NaN, sent as null),
    for every value at once. The grid's cells go to the page as arrays: where orjson is installed, Dash's encoder
    visits a list's 10,000 numbers one by one in Python (half of a page load's server time on a 20k run), and hands
    an array over whole."""
    rounded = values.astype(np.float64)
    finite = np.isfinite(rounded) & (rounded != 0)
    given = rounded[finite]
    with np.errstate(over="ignore", invalid="ignore"):  # a denormal's scale overflows: it is formatted below
        shift = digits - 1 - np.floor(np.log10(np.abs(given)))
        scale = 10.0 ** np.abs(shift)  # exact up to 10^22, the powers a score needs
        scaled = np.where(shift >= 0, given * scale, given / scale)
        whole = np.round(scaled)
        value = np.where(shift >= 0, whole / scale, whole * scale)
        tie = ~np.isfinite(scaled) | (np.abs(np.abs(scaled - np.trunc(scaled)) - 0.5) < 1e-6)  # formatted below
    value[tie] = [float(f"{v:.{digits}g}") for v in given[tie].tolist()]
    rounded[finite] = value
    return rounded


def missing_note(metric: str, missing: int, bin_size: int) -> Optional[str]:
    """What a grey cell means, when the grid has any: datapoints the metric gave no number."""
    if not missing:
        return None
    some = f"{missing} datapoint{'s' if missing != 1 else ''} {'have' if missing != 1 else 'has'}"
    binned = "; a cell is grey when one of its datapoints is" if bin_size > 1 else ""
    return f"grey: {some} no {metric} (NaN: the metric gave no number for {'them' if missing != 1 else 'it'}, " \
           f"e.g. a non-finite loss){binned}"
