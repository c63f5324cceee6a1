"""The Failures tab: findings of the chosen epoch, and clicks on them narrowing the datapoint table.

The findings of an epoch are those the trainer stored after validating it (``shared/findings.py``), else computed
when the tab is first shown for it; the backend keeps them (``ViewerBackend.findings``); a first page on this tab
comes with them (``view.failures_tab``).
A click writes its datapoints' idx, with the run and epoch they were found in, to ``TABLE_IDX_FILTER``
(``narrowing``; None for all). The table narrows only the epoch the narrowing names (``narrowed_idx``): an
answer that comes back after the user switched narrows nothing and is dropped. The narrowing ends when the run
or epoch really changes (not when a refresh re-sends the same epoch), and with **Clear filters**.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from dash import ALL, Dash, Input, Output, State, ctx, no_update

from runners.eval_viewer.controls.ids import EPOCH_SELECT, RUN_SELECT
from runners.eval_viewer.datapoint.ids import TAB_DATAPOINT
from runners.eval_viewer.failures.data import FINDINGS_ERRORS, chosen_datapoints, chosen_epoch, finding_key, narrowing
from runners.eval_viewer.failures.ids import (
    FAILURES_CONFUSION_CHART,
    FAILURES_DATA_MAP_CHART,
    FAILURES_FILTER_NOTE,
    FAILURES_FINDING,
    FAILURES_MORE,
    FAILURES_PANEL,
    FAILURES_SEPARATORS_CHART,
    FAILURES_SHOW_ALL,
    SENDS,
    TAB_FAILURES,
    VERIFY,
    VERIFY_CANCEL,
    VERIFY_POLL,
    VERIFY_STATUS,
)
from runners.eval_viewer.failures.verify_jobs import VerifyJobs, VerifyRefused
from runners.eval_viewer.failures.verify_view import HIDDEN, SHOWN, status_view
from runners.eval_viewer.failures.view import failures_tab, findings_content
from runners.eval_viewer.shared import opened
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.feature import Feature, Tab
from runners.eval_viewer.shared.ids import TABS
from runners.eval_viewer.table.ids import TABLE_CLEAR_FILTERS, TABLE_IDX_FILTER, TABLE_QUERY, TABLE_ROWS

READING = "Reading the epoch's findings…"  # the panel, from a switch of run or epoch to the server's answer
_END_NARROWING = """function(run, epoch, _clear, narrowed) {
    const none = window.dash_clientside.no_update;
    const trigger = (window.dash_clientside.callback_context.triggered[0] || {}).prop_id || '';
    const ends = narrowed && (trigger.startsWith('CLEAR.') || narrowed.run !== run || narrowed.epoch !== epoch);
    return ends ? [null, ''] : [none, none];
}""".replace("CLEAR", TABLE_CLEAR_FILTERS)


# The table answered under a finding's narrowing (its query holds the narrowing's idx): the note gives the rows it
# shows, which its own filters (wrong only, a typed filter) may make fewer than the finding's datapoints, and follows
# them.
_SHOWN_NOTE = """function(answer, narrowed, query) {
    const none = window.dash_clientside.no_update;
    if (!answer || !narrowed || !Array.isArray(narrowed.idx) || !query || query.run !== narrowed.run
        || query.epoch !== narrowed.epoch || JSON.stringify(query.idx || null) !== JSON.stringify(narrowed.idx)) {
        return none;
    }
    const shown = answer.rowCount, all = narrowed.idx.length;
    return `Table filtered to ${shown} datapoints: ${narrowed.what}` + (shown < all ? ` (${all} in the finding: `
        + `the table's own filters, wrong only or a typed filter, hide ${all - shown})` : '');
}"""


def register(app: Dash, backend: ViewerBackend) -> None:
    _narrow_the_table(app, backend)
    _verify(app, backend)

    @app.callback(Output(FAILURES_PANEL, "children"), Output(FAILURES_MORE, "children"),
                  Output(FAILURES_SEPARATORS_CHART, "figure"), Output(FAILURES_DATA_MAP_CHART, "figure"),
                  Output(FAILURES_CONFUSION_CHART, "figure"),
                  Input(RUN_SELECT, "value"), Input(EPOCH_SELECT, "value"), Input(TABS, "value"),
                  prevent_initial_call=True)  # a first page on this tab comes with its findings (view.failures_tab)
    def show_findings(run_path: Optional[str], epoch_key: Optional[str], tab: Optional[str]) -> tuple:
        if tab != TAB_FAILURES:
            return (no_update,) * 5
        return findings_content(backend, run_path, epoch_key)

    opened.follow(app, f"""function(idx, tab) {{  // a datapoint opened while the Failures tab shows: show it
        return tab === '{TAB_FAILURES}' && idx !== null && idx !== undefined
            ? '{TAB_DATAPOINT}' : window.dash_clientside.no_update;
    }}""", (TABS, "value"))


def _narrow_the_table(app: Dash, backend: ViewerBackend) -> None:
    """A click on a finding narrows the table to its datapoints; the narrowing ends with a switch or Clear
    filters."""
    @app.callback(Output(TABLE_IDX_FILTER, "data"), Output(FAILURES_FILTER_NOTE, "children"),
                  Input({"type": FAILURES_FINDING, "index": ALL}, "n_clicks"),
                  Input(FAILURES_SEPARATORS_CHART, "clickData"), Input(FAILURES_CONFUSION_CHART, "clickData"),
                  Input(FAILURES_SHOW_ALL, "n_clicks"), State(RUN_SELECT, "value"), State(EPOCH_SELECT, "value"),
                  prevent_initial_call=True)
    def filter_table(_: list, separator: Optional[dict], cell: Optional[dict], __: Optional[int],
                     run_path: Optional[str], epoch_key: Optional[str]) -> tuple:
        trigger = ctx.triggered_id
        epoch = chosen_epoch(backend, run_path, epoch_key)
        if trigger == FAILURES_SHOW_ALL or epoch is None:
            return None, ""
        if not ctx.triggered or not ctx.triggered[0].get("value"):
            return no_update, no_update  # a finding button was drawn, not clicked
        try:
            chosen = chosen_datapoints(backend.findings(epoch), trigger, separator, cell)
        except FINDINGS_ERRORS as exc:
            return no_update, str(exc)
        if chosen is None:
            return no_update, no_update
        idx, what = chosen
        return (narrowing(run_path, epoch_key, idx, finding_key(trigger, separator, cell), what),
                f"Filtering the table to the {len(idx)} datapoints of: {what}…")

    app.clientside_callback(_SHOWN_NOTE, Output(FAILURES_FILTER_NOTE, "children", allow_duplicate=True),
                            Input(TABLE_ROWS, "data"), State(TABLE_IDX_FILTER, "data"), State(TABLE_QUERY, "data"),
                            prevent_initial_call=True)

    app.clientside_callback(  # a narrowing is of the run and epoch it was found in: it ends when either differs
        # (a refresh tick re-sending the same epoch is no switch; a late answer for the run just left is dropped as
        # it lands), and with Clear filters; in the browser, so no refresh tick can drop it
        _END_NARROWING, Output(TABLE_IDX_FILTER, "data", allow_duplicate=True),
        Output(FAILURES_FILTER_NOTE, "children", allow_duplicate=True), Input(RUN_SELECT, "value"),
        Input(EPOCH_SELECT, "value"), Input(TABLE_CLEAR_FILTERS, "n_clicks"),
        Input(TABLE_IDX_FILTER, "data"), prevent_initial_call=True)

    app.clientside_callback(  # the tab shown for another run or epoch says so at once: until the server's answer
        # lands it would go on showing the findings of the epoch left, live buttons included
        f"""function(run, epoch, tab) {{
            if (tab !== '{TAB_FAILURES}') {{ return window.dash_clientside.no_update; }}
            const key = JSON.stringify([run, epoch]);
            if (window.lanternFailuresKey === key) {{ return window.dash_clientside.no_update; }}
            window.lanternFailuresKey = key;
            return {json.dumps(READING)};
        }}""", Output(FAILURES_PANEL, "children", allow_duplicate=True), Input(RUN_SELECT, "value"),
        Input(EPOCH_SELECT, "value"), Input(TABS, "value"), prevent_initial_call=True)


def _verify(app: Dash, backend: ViewerBackend) -> None:
    """A finding's verify button starts its verification in the background; the tab polls its status while it
    runs, Cancel stops it; a switch of run or epoch shows that run's."""
    jobs = VerifyJobs(backend.trust_configs)

    @app.callback(Output(VERIFY_STATUS, "children"), Output(VERIFY_POLL, "disabled"),
                  Output(VERIFY_CANCEL, "style"),
                  Input({"type": VERIFY, "index": ALL}, "n_clicks"), Input(VERIFY_POLL, "n_intervals"),
                  Input(VERIFY_CANCEL, "n_clicks"), Input(RUN_SELECT, "value"),
                  Input(EPOCH_SELECT, "value"), prevent_initial_call=True)
    def verification(_: list, __: Optional[int], ___: Optional[int], run_path: Optional[str],
                     epoch_key: Optional[str]) -> tuple:
        trigger = ctx.triggered_id
        refusal = None
        if isinstance(trigger, dict) and trigger.get("type") == VERIFY:
            if not ctx.triggered[0].get("value"):
                return no_update, no_update, no_update  # verify buttons were drawn, not clicked
            refusal = start(jobs, backend, run_path, epoch_key, str(trigger.get("index")))
        elif trigger == VERIFY_CANCEL:
            jobs.cancel(run_path or "")
        job = jobs.job(run_path) if run_path else None
        running = job is not None and job.running
        results = jobs.results(run_path, epoch_key) if run_path and epoch_key else []
        return (status_view(job, results, refusal), not running,
                SHOWN if running else HIDDEN)


def start(jobs: VerifyJobs, backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str],
          key: str) -> Optional[str]:
    """Start verifying finding ``key`` of the chosen epoch; why not, when it cannot start."""
    epoch = chosen_epoch(backend, run_path, epoch_key)
    if epoch is None or run_path is None or epoch_key is None:
        return "Choose a run and an epoch first."
    try:
        findings: dict[str, Any] = backend.findings(epoch).to_dict()
        jobs.start(run_path, epoch_key, epoch.dir, key, findings)
    except (VerifyRefused, *FINDINGS_ERRORS) as exc:
        return str(exc)
    return None


FEATURE = Feature(register, SENDS, Tab(TAB_FAILURES, failures_tab))
