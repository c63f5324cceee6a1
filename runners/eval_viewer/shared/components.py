"""Pieces several callbacks draw: score badges, the epoch status, messages, comparison columns."""

from __future__ import annotations

from typing import Optional

from dash import dcc, html

from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.elements import alert, badge
from runners.eval_viewer.shared.runs import Epoch, Run
from runners.eval_viewer.shared.table import HIDDEN_COLUMNS, TABLE_ERRORS

NOTHING_OPEN = "Click a datapoint in the table or the grid to open it (then j / k for the next and previous)."


def message(text: str, color: str = "info") -> html.Div:
    return alert(text, color=color, class_name="viewer-message")


def percentiles(backend: ViewerBackend, epoch: Epoch, datapoint: dict) -> dict[str, float]:
    """Where each of the datapoint's scores sits in its epoch: % of datapoints with a value at most this one."""
    try:
        table = backend.table(epoch)
    except TABLE_ERRORS:
        return {}
    columns = dict(table.columns())
    binary = backend.binary_scores(epoch)  # a 0/1 score's place says nothing ("accuracy 0 · p83")
    found = {name: table.percentile(name, value) for name, value in datapoint.get("scores", {}).items()
             if columns.get(name) == "float" and isinstance(value, (int, float)) and name not in binary}
    return {name: value for name, value in found.items() if value is not None}


def score_badges(scores: dict, percentile: Optional[dict] = None) -> list:
    """One badge per score; with ``percentile``, its place in the epoch (p97: above 97 % of datapoints).
    Scores the table shows through its label and prediction columns are left to the class badges."""
    percentile = percentile or {}
    badges = []
    for name, value in scores.items():
        if name in HIDDEN_COLUMNS:
            continue
        place = percentile.get(name)
        text = f"{name} {_format(value)}" + (f" · p{place:.0f}" if place is not None else "")
        title = f"{place:.1f} % of this epoch's datapoints have {name} at most this value" if place is not None \
            else None
        badges.append(badge(text, color="secondary", class_name="score-badge", title=title))
    return badges


def _format(value: object) -> str:
    return "n/a" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def datapoint_title(run: Run, epoch: Epoch, idx: int) -> html.H5:
    return html.H5(f"datapoint {idx} · {run.name} · {epoch.label}", className="datapoint-title")


def tab_of(label: str, value: str, children: list) -> dcc.Tab:
    """A tab on the right: its ``TABS`` value is its id, its body the ``children``."""
    return dcc.Tab(label=label, value=value, id=value, children=html.Div(children, className="tab-body"))
