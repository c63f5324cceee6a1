"""Run, epoch and metric pickers, and the messages about folders that hold no run."""

from __future__ import annotations

import json

from dash import dcc, html

from debuggers.pages.file_format import CorruptPageError
from runners.eval_viewer.controls.data import nearest_debug_epoch, run_options
from runners.eval_viewer.controls.ids import (
    EPOCH_BADGES,
    EPOCH_SELECT,
    EPOCHS_RUN,
    FOLLOW_LATEST,
    MESSAGES,
    METRIC_SELECT,
    NEAREST_DEBUG_EPOCH,
    REFRESH,
    REFRESH_POLL,
    RUN_SELECT,
    VIEW_BUILT_FROM,
)
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.elements import alert, badge
from runners.eval_viewer.shared.first_view import FirstView
from runners.eval_viewer.shared.runs import Discovery, Epoch

FOLLOW = "follow"  # the "follow the latest epoch" tick box's value
REFRESH_MS = 5000  # how often the page asks whether the runs changed (a run still training grows)


def problem_alerts(discovery: Discovery) -> list:
    return [alert(problem, color="warning", class_name="discovery-problem") for problem in discovery.problems]


def _labelled(label: str, component: object, width: str) -> html.Div:
    return html.Div([html.Label(label), component], className="control", style={"width": width})


def refresh_poll(first: FirstView, on_disk: dict[str, str]) -> list:
    """What ``assets/refresh.js`` asks about and ticks (``controls/callbacks.py``): its period, and what the page
    was built from (``on_disk``: ``disk_state`` of the first run and epoch), so a change before its first question
    is not missed; ``VIEW_BUILT_FROM`` says the same of each view switched to since. ``REFRESH`` is given no data
    (a Store given None sets it again when it mounts)."""
    return [dcc.Store(id=REFRESH), dcc.Store(id=VIEW_BUILT_FROM),
            html.Div(id=REFRESH_POLL, hidden=True, **{
                "data-ms": str(REFRESH_MS), "data-runs": on_disk["runs"], "data-epoch": on_disk["epoch"],
                "data-key": json.dumps([first.run, first.epoch], separators=(",", ":"), ensure_ascii=False)})]


def controls(discovery: Discovery, first: FirstView, on_disk: dict[str, str], saved_views: html.Div) -> html.Div:
    """The pickers, the epoch's badges and ``saved_views`` (``address.view``) in a row, the messages above them."""
    return html.Div([
        html.Div([*problem_alerts(discovery), *[alert(problem, "warning", "address-problem")
                                                for problem in first.problems]], id=MESSAGES),
        html.Div([
            _labelled("Run", dcc.Dropdown(id=RUN_SELECT, options=run_options(discovery), clearable=False,
                                          value=first.run, placeholder="no run found"), "34%"),
            _labelled("Epoch", html.Div([
                dcc.Dropdown(id=EPOCH_SELECT, options=first.epochs, value=first.epoch, clearable=False),
                dcc.Checklist(id=FOLLOW_LATEST, options=[{"label": "follow the latest epoch", "value": FOLLOW}],
                              value=[FOLLOW] if first.follow else [], className="follow-latest")]), "18%"),
            _labelled("Metric", dcc.Dropdown(id=METRIC_SELECT, options=first.view.metrics,
                                             value=first.view.metric, clearable=False), "18%"),
            html.Div(first.view.badges, id=EPOCH_BADGES, className="badges"),
            saved_views,
        ], className="controls"),
        *refresh_poll(first, on_disk),
        dcc.Store(id=EPOCHS_RUN, data=first.run),
    ])


def debug_hint(epochs: list[Epoch], epoch: Epoch) -> list:
    """For an epoch without debug outputs, a button that switches to the nearest epoch that has them."""
    nearest = None if epoch.has_debug else nearest_debug_epoch(epochs, epoch)
    if nearest is None:
        return []
    return [html.Button(f"→ {nearest.label} has debug outputs", id=NEAREST_DEBUG_EPOCH, value=nearest.key,
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
