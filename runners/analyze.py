"""Print why a run's datapoints fail: ranked slices, separating quantities, clusters, label errors.

    python -m runners.analyze --run logs/examples/planted_failures_trainer [--epoch N] [--json]

The same findings as ``analysis.failures.analyze`` (for notebooks) and the viewer's Failures tab.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from analysis.failures import FailureDefinition, Findings, analyze
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
    args = parser.parse_args(argv)
    try:
        findings = analyze(args.run, args.epoch, FailureDefinition(args.failure_metric, args.worst_fraction),
                           args.min_size, args.top)
    except LanternUserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(findings.to_dict(), indent=1, default=_plain) if args.json else format_findings(findings))
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
