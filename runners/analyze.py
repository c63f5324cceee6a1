"""Print why a run's datapoints fail: ranked slices, separating quantities, clusters, label errors.

    python -m runners.analyze --run logs/examples/planted_failures_trainer [--epoch N] [--json]
    python -m runners.analyze --run RUN --verify [KEY ...] --trust-configs

The same findings as ``analysis.failures.analyze`` (for notebooks) and the viewer's Failures tab. ``--verify``
confirms findings by intervention on the epoch's own model (``runners/verify.py``): it rebuilds the model from
the config file the run names, so it needs ``--trust-configs``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from analysis.failures import FailureDefinition, Findings, analyze, resolve_epoch_dir
from analysis.intervention import Comparison
from runners.run_model import TRUST_FLAG
from runners.verify import Result, Verification, verify_findings
from utils.errors import LanternUserError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runners.analyze", description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a trainer or evaluator work dir (or one epoch_N folder)")
    parser.add_argument("--epoch", type=int, default=None,
                        help="epoch to analyse (default: the last one with captured debug outputs, else the last)")
    parser.add_argument("--failure-metric", default=None,
                        help="define failures as the worst share of this score column instead of wrong predictions")
    parser.add_argument("--worst-fraction", type=float, default=0.1, help="that share (default 0.1)")
    parser.add_argument("--min-size", type=int, default=None, help="smallest slice (default: 1%% of rows, >= 10)")
    parser.add_argument("--top", type=int, default=10, help="findings per list (default 10)")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument("--verify", nargs="*", metavar="KEY", default=None,
                        help="confirm findings by intervention on the epoch's model: the findings named (slices-0, "
                             "separators-2, nan_origins-0, ...), or every one but label suspects and dead units")
    parser.add_argument(TRUST_FLAG, action="store_true", dest="trust_configs",
                        help="let --verify import the config file the run names (runs its code: only for runs you "
                             "trust)")
    parser.add_argument("--seed", type=int, default=0, help="seed of --verify's random control sets (default 0)")
    args = parser.parse_args(argv)
    failure = FailureDefinition(args.failure_metric, args.worst_fraction)
    try:
        findings = analyze(args.run, args.epoch, failure, args.min_size, args.top)
        verified = None if args.verify is None else verify_findings(
            resolve_epoch_dir(args.run, args.epoch), findings.to_dict(), args.verify or None, args.trust_configs,
            failure, args.seed)
    except LanternUserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        data = findings.to_dict() | ({} if verified is None else {"verifications": [r.to_dict() for r in verified]})
        print(json.dumps(data, indent=1, default=_plain))
    else:
        print(format_findings(findings) + ("" if verified is None else "\n" + format_verifications(verified)))
    return 0


def format_findings(findings: Findings) -> str:
    """The findings as plain-text tables, most telling first in each."""
    lines = [f"{findings.table_path}",
             f"failures: {findings.failures} of {findings.datapoints} datapoints ({findings.failure_definition})"]
    lines += [f"note: {note}" for note in findings.notes]
    lines += _table("Slices that fail more than the rest", ["#", "slice", "size", "fail inside", "fail outside"],
                    [[i + 1, s.description, s.size, f"{s.failure_rate:.0%}", f"{s.rest_failure_rate:.0%}"]
                     for i, s in enumerate(findings.slices)])
    tested = findings.separators_tested
    lines += _table(f"Separating quantities (AUROC failures vs passes; Mann-Whitney p < 0.05/{tested}, {tested} "
                    "numeric columns tested)", ["#", "column", "AUROC", "direction"],
                    [[i + 1, s.column, f"{s.auroc:.3f}", s.direction] for i, s in enumerate(findings.separators)])
    lines += _table("Failure clusters in captured feature spaces",
                    ["#", "debugger", "size", "fail rate", "described by"],
                    [[i + 1, c.debugger, c.size, f"{c.failure_rate:.0%}", c.description]
                     for i, c in enumerate(findings.clusters)])
    lines += _table("Suspected label errors (cleanlab; those no slice explains first, each part by self-confidence)",
                    ["#", "idx", "label", "model says", "p(label)"],
                    [[i + 1, e.idx, e.label, e.suggested, f"{e.self_confidence:.3f}"]
                     for i, e in enumerate(findings.label_issues)])
    lines += _table("Where NaN/Inf first appears", ["#", "module", "type", "datapoints"],
                    [[i + 1, o.module, o.module_type, o.count] for i, o in enumerate(findings.nan_origins)])
    lines += _table("Dead units (a summary with one value for every datapoint)", ["#", "column", "value"],
                    [[i + 1, d.column, f"{d.value:g}"] for i, d in enumerate(findings.dead_units)])
    return "\n".join(lines)


def format_verifications(results: list[Result]) -> str:
    """What each intervention did to its finding's failures, against the matched random set."""
    done = [r for r in results if isinstance(r, Verification)]
    lines = _table("Verified by intervention (the finding's datapoints rerun with the patch, against as many failing "
                   "and passing ones drawn at random elsewhere; 95% intervals)",
                   ["key", "finding", "intervention", "failing before → after", "change", "control change",
                    "verdict"],
                   [[r.key, r.finding, r.intervention, _before_after(r), *_changes(r.comparison), r.verdict]
                    for r in done])
    reasons: dict[tuple[str, str], list[str]] = {}
    for r in done:
        reasons.setdefault((r.verdict, r.comparison.reason), []).append(r.key)
    lines += [f"{', '.join(keys)}: {verdict}: {reason}" for (verdict, reason), keys in reasons.items()]
    lines += [f"{r.key} ({r.finding}): not verifiable: {r.reason}" for r in results if not isinstance(r, Verification)]
    return "\n".join(lines)


def _before_after(result: Verification) -> str:
    counts = result.comparison.finding
    return f"{counts.failures_before} → {counts.failures_after} of {counts.size}"


def _changes(comparison: Comparison) -> list[str]:
    """The finding's and the control's change in failure rate, each with its interval."""
    return [f"{comparison.finding.change:+.2f} {comparison.finding_interval}",
            f"{comparison.control.change:+.2f} {comparison.control_interval}"]


def _table(title: str, header: list[str], rows: list[list[Any]]) -> list[str]:
    if not rows:
        return ["", f"{title}: none"]
    cells = [header] + [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return ["", title] + ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                          for row in cells]


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else str(value)


if __name__ == "__main__":
    sys.exit(main())
