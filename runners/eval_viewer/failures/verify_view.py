"""The Failures tab's verification: a "verify" button beside each finding a check can test
(``analysis.finding_plans.not_offered``), and a panel with the status of the run's verification (polled while it
runs), a Cancel button and the results so far, under headings that say what each verdict rests on: an intervention
on the model, or a held-out replication (``verify_jobs.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from dash import dcc, html

from analysis.failures import Findings
from analysis.finding_plans import not_offered
from runners.eval_viewer.failures.ids import VERIFY, VERIFY_CANCEL, VERIFY_POLL, VERIFY_STATUS
from runners.eval_viewer.failures.verify_jobs import CANCELLED, FAILED, VerifyJob

POLL_MS = 1000
LISTS = {  # the tab's keys -> to_dict()'s
    "slice": "meta.slices", "inslice": "inputs.slices", "islice": "internals.slices",
    "iseparator": "internals.separators", "subgroup": "subgroups", "suspects": "suspect_groups",
    "nan": "nan_origins", "classslice": "class_slices", "trainlabels": "training_label_groups"}
HOW = ("Gives the finding a verdict: an intervention on the epoch's model where the finding names a part to act on "
       "(its units, a NaN module, a part of the input), on its datapoints and on as many failing and passing ones "
       "drawn at random; else a held-out replication (found on one half of the datapoints, tested on the other)")
RESTS_ON = {  # heading and what it means, by what the verdicts rest on
    "intervention": ("Verified by intervention", "The finding's datapoints rerun with the part it names replaced, "
                                                 "against as many failing and passing ones drawn at random; 95% "
                                                 "intervals"),
    "replication": ("Replicated on held-out datapoints", "Found again by the analysis of one half of the epoch's "
                                                         "datapoints, then tested on the other half, which took no "
                                                         "part in finding it: real on these data, not shown to be "
                                                         "a cause"),
    None: ("Not verifiable", "No check can test these findings"),
}
VERDICT_COLOURS = {"confirmed": "#2b8a3e", "correlational": "#666", "inconclusive": "#b35c00",
                   "replicated": "#2b8a3e", "not replicated": "#666"}
HIDDEN, SHOWN = {"display": "none"}, {"display": "inline-block"}


def verify_panel() -> html.Div:
    """Where the run's verification shows: its status and results, a Cancel button, the poll while it runs."""
    return html.Div([
        html.Div(id=VERIFY_STATUS),
        html.Button("Cancel verification", id=VERIFY_CANCEL, className="small-button", style=HIDDEN),
        dcc.Interval(id=VERIFY_POLL, interval=POLL_MS, disabled=True),
    ])


def verify_button(key: str, roles: Mapping[str, Any]) -> Optional[html.Button]:
    """The button that verifies the tab's finding ``key`` (``slice-0``, ...); None for a finding no check can test
    (by the epoch table's ``roles``)."""
    kind, _, position = key.partition("-")
    if kind not in LISTS or not_offered(f"{LISTS[kind]}-{position}", roles):
        return None
    return _button("verify", f"{LISTS[kind]}-{position}")


def separator_buttons(findings: Findings, roles: Mapping[str, Any]) -> html.Div:
    """One verify button per meta separating quantity a check can test (the chart's bars cannot hold one)."""
    keys = [(s.column, f"meta.separators-{i}") for i, s in enumerate(findings.meta.separators)]
    buttons = [_button(column, key) for column, key in keys if not not_offered(key, roles)]
    if not buttons:
        return html.Div()
    return html.Div([html.Span("Verify a separating quantity: ", className="hint"), *buttons])


def status_view(job: Optional[VerifyJob], results: list[VerifyJob], refusal: Optional[str] = None) -> list[Any]:
    """The running (or last failed) verification and the results so far, newest first."""
    lines: list[Any] = [html.P(refusal, className="error")] if refusal else []
    if job is not None and job.running:
        lines.append(html.P(f"Verifying {job.key} ({job.finding}): {job.message}", className="hint"))
    elif job is not None and job.state in (FAILED, CANCELLED):
        lines.append(html.P(f"Verification of {job.key} ({job.finding}) {job.state}: {job.message}",
                            className="error" if job.state == FAILED else "hint"))
    for rests_on, (heading, meaning) in RESTS_ON.items():
        done = [job for job in reversed(results) if (job.result or {}).get("rests_on") == rests_on]
        if done:
            lines += [html.H4(heading, title=meaning, className="verify-heading"),
                      html.Ul([_result(job) for job in done])]
    return lines


def _result(job: VerifyJob) -> html.Li:
    result = job.result or {}
    verdict = result.get("verdict")
    if verdict is None:
        return html.Li(f"{job.key} ({job.finding}): {result.get('reason', '')}", className="hint")
    shown = [html.B(verdict, style={"color": VERDICT_COLOURS.get(verdict)}), f" {job.key} ({job.finding}): "]
    if result.get("rests_on") == "replication":
        found = f"found on half A as '{result['found_as']}'; " if result.get("found_as") else ""
        tried = result.get("tried")
        shown += [f"{found}{result['on_b']}. ", html.Span(result.get("reason", ""), className="hint")]
        shown += [html.Span(f" Tried first: {_intervention(tried)}, {tried['verdict']}.", className="hint")] \
            if tried else []
        return html.Li(shown)
    shown += [f"{_intervention(result)}, change {_change(result, 'change')}, on a matched random set "
              f"{_change(result, 'control_change')}. ", html.Span(result.get("reason", ""), className="hint")]
    beside = result.get("replication")
    if beside:
        shown.append(html.Span(f" Held out: {beside['verdict']} ({beside['on_b']}).", className="hint"))
    return html.Li(shown)


def _intervention(result: dict[str, Any]) -> str:
    """The intervention and what it did to the finding's failures."""
    counts = result["finding_counts"]
    before, after = counts["fixed"] + counts["stayed_failing"], counts["broken"] + counts["stayed_failing"]
    return f"{result['intervention']}; failing {before} → {after} of {sum(counts.values())}"


def _change(result: dict[str, Any], name: str) -> str:
    low, high = result[f"{name}_interval"]
    return f"{result[name]:+.2f} [{low:+.2f}, {high:+.2f}]"


def _button(text: str, index: str) -> html.Button:
    return html.Button(text, id={"type": VERIFY, "index": index}, className="small-button", title=HOW,
                       style={"marginLeft": "6px"})
