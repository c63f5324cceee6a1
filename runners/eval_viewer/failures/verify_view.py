"""The Failures tab's verification: a "verify" button beside each finding, and a panel with the status of the run's
verification (polled while it runs), a Cancel button and the results so far (``verify_jobs.py``)."""

from __future__ import annotations

from typing import Any, Optional

from dash import dcc, html

from analysis.failures import Findings
from runners.eval_viewer.failures.ids import VERIFY, VERIFY_CANCEL, VERIFY_POLL, VERIFY_STATUS
from runners.eval_viewer.failures.verify_jobs import CANCELLED, FAILED, VerifyJob

POLL_MS = 1000
LISTS = {"slice": "meta.slices", "islice": "internals.slices", "iseparator": "internals.separators",
         "subgroup": "subgroups", "suspects": "suspect_groups", "nan": "nan_origins",
         "classslice": "class_slices"}  # the tab's keys -> to_dict()'s
HOW = ("Reruns the epoch's model on the finding's datapoints with what it names (a unit, a NaN module, an input "
       "region) set to its mean over passing datapoints, and on as many failing and passing ones drawn at random")
VERDICT_COLOURS = {"confirmed": "#2b8a3e", "correlational": "#666", "inconclusive": "#b35c00"}
HIDDEN, SHOWN = {"display": "none"}, {"display": "inline-block"}


def verify_panel() -> html.Div:
    """Where the run's verification shows: its status and results, a Cancel button, the poll while it runs."""
    return html.Div([
        html.Div(id=VERIFY_STATUS),
        html.Button("Cancel verification", id=VERIFY_CANCEL, className="small-button", style=HIDDEN),
        dcc.Interval(id=VERIFY_POLL, interval=POLL_MS, disabled=True),
    ])


def verify_button(key: str) -> Optional[html.Button]:
    """The button that verifies the tab's finding ``key`` (``slice-0``, ...); None for findings never verifiable."""
    kind, _, position = key.partition("-")
    if kind not in LISTS:
        return None
    return _button("verify", f"{LISTS[kind]}-{position}")


def separator_buttons(findings: Findings) -> html.Div:
    """One verify button per meta separating quantity (the chart's bars cannot hold one)."""
    if not findings.meta.separators:
        return html.Div()
    return html.Div([html.Span("Verify a separating quantity: ", className="hint"),
                     *[_button(s.column, f"meta.separators-{i}") for i, s in enumerate(findings.meta.separators)]])


def status_view(job: Optional[VerifyJob], results: list[VerifyJob], refusal: Optional[str] = None) -> list[Any]:
    """The running (or last failed) verification and the results so far, newest first."""
    lines: list[Any] = [html.P(refusal, className="error")] if refusal else []
    if job is not None and job.running:
        lines.append(html.P(f"Verifying {job.key} ({job.finding}): {job.message}", className="hint"))
    elif job is not None and job.state in (FAILED, CANCELLED):
        lines.append(html.P(f"Verification of {job.key} ({job.finding}) {job.state}: {job.message}",
                            className="error" if job.state == FAILED else "hint"))
    if results:
        lines.append(html.H4("Verified by intervention", title=HOW))
        lines.append(html.Ul([_result(done) for done in reversed(results)]))
    return lines


def _result(job: VerifyJob) -> html.Li:
    result = job.result or {}
    verdict = result.get("verdict")
    if verdict is None:
        return html.Li(f"{job.key} ({job.finding}): not verifiable: {result.get('reason', '')}", className="hint")
    counts = result["finding_counts"]
    before, after = counts["fixed"] + counts["stayed_failing"], counts["broken"] + counts["stayed_failing"]
    size = sum(counts.values())
    return html.Li([
        html.B(verdict, style={"color": VERDICT_COLOURS.get(verdict)}), f" {job.key} ({job.finding}): ",
        f"{result['intervention']}; failing {before} → {after} of {size}, change {_change(result, 'change')}, "
        f"on a matched random set {_change(result, 'control_change')}. ",
        html.Span(result.get("reason", ""), className="hint")])


def _change(result: dict[str, Any], name: str) -> str:
    low, high = result[f"{name}_interval"]
    return f"{result[name]:+.2f} [{low:+.2f}, {high:+.2f}]"


def _button(text: str, index: str) -> html.Button:
    return html.Button(text, id={"type": VERIFY, "index": index}, className="small-button", title=HOW,
                       style={"marginLeft": "6px"})
