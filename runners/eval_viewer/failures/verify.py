"""The Failures tab's verifications: a click on a finding's verify button starts one in the background
(``backend/verify_jobs.py``), the tab polls its status every second while it runs, Cancel stops it.

One callback answers the clicks, the polls, Cancel and a change of run or epoch (which shows that run's
verification): all of them only draw the status, so nothing here waits on a rerun.
"""

from __future__ import annotations

from typing import Any, Optional

from dash import ALL, Dash, Input, Output, ctx, no_update

from runners.eval_viewer.failures import verify_view as layout
from runners.eval_viewer.failures.callbacks import FINDINGS_ERRORS, chosen_epoch
from runners.eval_viewer.failures.verify_jobs import VerifyJobs, VerifyRefused
from runners.eval_viewer.shared import ids
from runners.eval_viewer.shared.backend import ViewerBackend


def register(app: Dash, backend: ViewerBackend) -> None:
    jobs = VerifyJobs(backend.trust_configs)

    @app.callback(Output(layout.VERIFY_STATUS, "children"), Output(layout.VERIFY_POLL, "disabled"),
                  Output(layout.VERIFY_CANCEL, "style"),
                  Input({"type": layout.VERIFY, "index": ALL}, "n_clicks"), Input(layout.VERIFY_POLL, "n_intervals"),
                  Input(layout.VERIFY_CANCEL, "n_clicks"), Input(ids.RUN_SELECT, "value"),
                  Input(ids.EPOCH_SELECT, "value"), prevent_initial_call=True)
    def verification(_: list, __: Optional[int], ___: Optional[int], run_path: Optional[str],
                     epoch_key: Optional[str]) -> tuple:
        trigger = ctx.triggered_id
        refusal = None
        if isinstance(trigger, dict) and trigger.get("type") == layout.VERIFY:
            if not ctx.triggered[0].get("value"):
                return no_update, no_update, no_update  # verify buttons were drawn, not clicked
            refusal = start(jobs, backend, run_path, epoch_key, str(trigger.get("index")))
        elif trigger == layout.VERIFY_CANCEL:
            jobs.cancel(run_path or "")
        job = jobs.job(run_path) if run_path else None
        running = job is not None and job.running
        results = jobs.results(run_path, epoch_key) if run_path and epoch_key else []
        return (layout.status_view(job, results, refusal), not running,
                layout.SHOWN if running else layout.HIDDEN)


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
