"""Pieces several callbacks draw: score badges, the epoch status, messages, comparison columns."""

from __future__ import annotations

import hashlib
from typing import Optional

from dash import html

from debuggers.pages.file_format import CorruptPageError
from runners.eval_viewer.shared import ids
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.elements import alert, badge
from runners.eval_viewer.shared.runs import Epoch, Run
from runners.eval_viewer.shared.scores import ScoresError
from runners.eval_viewer.shared.table import HIDDEN_COLUMNS, TABLE_ERRORS
from runners.eval_viewer.training.data import TRAINING_LOGS

NOTHING_OPEN = "Click a datapoint in the table or the grid to open it (then j / k for the next and previous)."


def message(text: str, color: str = "info") -> html.Div:
    return alert(text, color=color, class_name="viewer-message")


def default_epoch(epochs: list[Epoch]) -> Optional[str]:
    """The latest epoch with debug outputs (what a user opens the viewer for), else the latest."""
    with_debug = [e for e in epochs if e.has_debug]
    chosen = (with_debug or epochs or [None])[-1]
    return chosen.key if chosen else None


def epoch_option(epoch: Epoch) -> dict:
    suffix = " · debug" if epoch.has_debug else " · debug removed" if epoch.debug_removed else ""
    return {"label": epoch.label + suffix, "value": epoch.key}


def nearest_debug_epoch(epochs: list[Epoch], epoch: Epoch) -> Optional[Epoch]:
    """The epoch with debug outputs closest to ``epoch`` (the later one on a tie); None without any."""
    with_debug = [e for e in epochs if e.has_debug and e.number is not None]
    if epoch.number is None or not with_debug:
        return None
    return min(with_debug, key=lambda e: (abs(e.number - epoch.number), -e.number))


def debug_hint(epochs: list[Epoch], epoch: Epoch) -> list:
    """For an epoch without debug outputs, a button that switches to the nearest epoch that has them."""
    nearest = None if epoch.has_debug else nearest_debug_epoch(epochs, epoch)
    if nearest is None:
        return []
    return [html.Button(f"→ {nearest.label} has debug outputs", id=ids.NEAREST_DEBUG_EPOCH, value=nearest.key,
                        className="small-button", title=f"open {nearest.label}, the nearest epoch with debug "
                                                        "outputs")]


def epoch_badges(backend: ViewerBackend, epoch: Epoch) -> list:
    """'debug outputs' / 'no debug outputs', 'partial' while (or because) pages are missing, 'no scores'."""
    badges = []
    if epoch.has_debug:
        badges.append(badge("debug outputs", color="info", class_name="badge-debug"))
        try:
            debug = backend.debug(epoch)
            if debug is not None and not debug.complete:
                badges.append(badge("partial", color="warning", class_name="badge-partial",
                                    title="the debug index says complete: false: pages are still being "
                                          "written, or the run stopped during this epoch"))
        except (CorruptPageError, OSError) as exc:
            badges.append(badge("debug index unreadable", color="danger", title=str(exc)))
    elif epoch.debug_removed:
        badges.append(badge("debug outputs removed", color="light", class_name="badge-no-debug",
                            title=f"{epoch.debug_removed} (config['debug_disk_budget_gb'])"))
    else:
        badges.append(badge("no debug outputs", color="light", class_name="badge-no-debug"))
    if epoch.scores_path is None:
        badges.append(badge("no scores yet", color="warning"))
    return badges


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


def epoch_state(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str]) -> str:
    """The signature of the run's epochs, the chosen epoch's files and the run's training monitor file."""
    run = backend.run(run_path)
    epochs = backend.epochs(run) if run else []
    epoch = next((e for e in epochs if e.key == epoch_key), None)
    try:
        version = backend.version(epoch) if epoch else None
    except ScoresError as exc:  # removed while listed: that too is a change
        version = str(exc)
    training = TRAINING_LOGS.version(run) if run else None  # the Training tab follows the run's monitor file
    return digest(([epoch_option(e) for e in epochs], version, training))


def digest(value: object) -> str:
    return hashlib.sha1(repr(value).encode()).hexdigest()[:16]
