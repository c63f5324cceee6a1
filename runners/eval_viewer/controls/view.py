"""Run, epoch and metric pickers, and the messages about folders that hold no run."""

from __future__ import annotations

import json
from typing import Optional

from dash import dcc, html

from runners.eval_viewer.shared import ids
from runners.eval_viewer.shared.elements import alert
from runners.eval_viewer.shared.first_view import FirstView
from runners.eval_viewer.shared.runs import Discovery, is_finished, last_modified

FOLLOW = "follow"  # the "follow the latest epoch" tick box's value
REFRESH_MS = 5000  # how often the page asks whether the runs changed (a run still training grows)


def run_options(discovery: Discovery) -> list[dict]:
    runs = sorted(discovery.runs.values(), key=lambda run: run.name)
    return [{"label": f"{run.name} ({'evaluator' if run.is_evaluator else 'trainer'})", "value": run.path}
            for run in runs]


def most_recent_run(discovery: Discovery) -> Optional[str]:
    """The finished run written to last (what a user opens the viewer for right after a run), not one still at its
    first epochs; the run written to last when none is finished."""
    runs = list(discovery.runs.values())
    return max(runs, key=lambda run: (is_finished(run), last_modified(run))).path if runs else None


def problem_alerts(discovery: Discovery) -> list:
    return [alert(problem, color="warning", class_name="discovery-problem") for problem in discovery.problems]


def _labelled(label: str, component: object, width: str) -> html.Div:
    return html.Div([html.Label(label), component], className="control", style={"width": width})


def refresh_poll(first: FirstView, on_disk: dict[str, str]) -> list:
    """What ``assets/refresh.js`` asks about and ticks (``callbacks/refresh.py``): its period, and what the page
    was built from (``on_disk``: ``disk_state`` of the first run and epoch), so a change before its first question
    is not missed; ``VIEW_BUILT_FROM`` says the same of each view switched to since. ``REFRESH`` is given no data
    (a Store given None sets it again when it mounts)."""
    return [dcc.Store(id=ids.REFRESH), dcc.Store(id=ids.VIEW_BUILT_FROM),
            html.Div(id=ids.REFRESH_POLL, hidden=True, **{
                "data-ms": str(REFRESH_MS), "data-runs": on_disk["runs"], "data-epoch": on_disk["epoch"],
                "data-key": json.dumps([first.run, first.epoch], separators=(",", ":"), ensure_ascii=False)})]


def saved_views(options: list[dict], problem: str) -> html.Div:
    """The run's named views (``callbacks/address.py``): pick one to open it, or name the view shown and save it."""
    return html.Div([
        html.Label("Saved views"),
        html.Div([dcc.Dropdown(id=ids.SAVED_VIEWS, options=options, placeholder="open a saved view",
                               clearable=False, style={"minWidth": "160px"}),
                  dcc.Input(id=ids.VIEW_NAME, placeholder="name this view", maxLength=80, debounce=False,
                            className="view-name"),
                  html.Button("Save view", id=ids.SAVE_VIEW, className="small-button"),
                  dcc.Store(id=ids.SAVE_VIEW_ASKED),
                  html.Span(problem, id=ids.VIEW_NOTE, className="hint")], className="saved-views"),
    ], className="control")


def controls(discovery: Discovery, first: FirstView, on_disk: dict[str, str],
             views: tuple[list[dict], str]) -> html.Div:
    return html.Div([
        html.Div([*problem_alerts(discovery), *[alert(problem, "warning", "address-problem")
                                                for problem in first.problems]], id=ids.MESSAGES),
        html.Div([
            _labelled("Run", dcc.Dropdown(id=ids.RUN_SELECT, options=run_options(discovery), clearable=False,
                                          value=first.run, placeholder="no run found"), "34%"),
            _labelled("Epoch", html.Div([
                dcc.Dropdown(id=ids.EPOCH_SELECT, options=first.epochs, value=first.epoch, clearable=False),
                dcc.Checklist(id=ids.FOLLOW_LATEST, options=[{"label": "follow the latest epoch", "value": FOLLOW}],
                              value=[FOLLOW] if first.follow else [], className="follow-latest")]), "18%"),
            _labelled("Metric", dcc.Dropdown(id=ids.METRIC_SELECT, options=first.view.metrics,
                                             value=first.view.metric, clearable=False), "18%"),
            html.Div(first.view.badges, id=ids.EPOCH_BADGES, className="badges"),
            saved_views(*views),
        ], className="controls"),
        *refresh_poll(first, on_disk),
        dcc.Store(id=ids.EPOCHS_RUN, data=first.run),
        dcc.Store(id=ids.URL_STATE),
    ])
