"""Print why a run's datapoints fail: meta causes first, then what the model does, subgroups, label suspects.

    python -m runners.analyze --run logs/examples/planted_failures_trainer [--epoch N] [--json] [--save]

The same findings as ``analysis.failures.analyze`` (for notebooks) and the viewer's Failures tab. ``--save``
stores them in the epoch's folder (``findings.json``), as the trainer does after each validation epoch, so the
viewer shows them at once. A run or table it cannot analyse gives one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Optional

from analysis.epoch_table import EPOCH_TABLE_FILE, EpochTable
from analysis.failures import FailureDefinition, Findings, analyze_table, resolve_epoch_dir
from analysis.findings import FamilyFindings, epoch_signature, save_findings
from analysis.internals import read_internals
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
    parser.add_argument("--save", action="store_true", help="store the findings in the epoch's folder "
                                                            "(findings.json) for the viewer")
    args = parser.parse_args(argv)
    try:
        epoch_dir = resolve_epoch_dir(args.run, args.epoch)
        findings = analyze_and_save(epoch_dir, FailureDefinition(args.failure_metric, args.worst_fraction),
                                    args.min_size, args.top, save=args.save)
    except LanternUserError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(json.dumps(findings.to_dict(), indent=1) if args.json else format_findings(findings))
    return 0


def analyze_and_save(epoch_dir: str, failure: Optional[FailureDefinition] = None, min_size: Optional[int] = None,
                     top: int = 10, save: bool = True) -> Findings:
    """The findings of ``epoch_dir`` (a folder holding an epoch table), stored there as ``findings.json`` when
    ``save`` (the viewer reads them only while the epoch's table and debug outputs are as they were)."""
    path = os.path.join(epoch_dir, EPOCH_TABLE_FILE)
    signature = epoch_signature(epoch_dir)
    findings = analyze_table(EpochTable(path), read_internals(epoch_dir), failure or FailureDefinition(), min_size,
                             top, epoch_dir)
    if save:
        save_findings(epoch_dir, findings, signature)
    return findings


def format_findings(findings: Findings) -> str:
    """The findings as plain-text tables, most telling first in each."""
    lines = [f"{findings.table_path}",
             f"failures: {findings.failures} of {findings.datapoints} datapoints ({findings.failure_definition})"]
    lines += [f"note: {note}" for note in findings.notes]
    lines += _family("Meta info (what the data says)", findings.meta)
    lines += _family("Internals (what the model does)", findings.internals)
    lines += _table("Subgroups in captured feature spaces", ["#", "space", "size", "fail", "rest", "described by",
                                                             "typical idx"],
                    [[i + 1, g.debugger, g.size, f"{g.failure_rate:.0%}", f"{g.rest_failure_rate:.0%}", g.description,
                      " ".join(map(str, g.examples))] for i, g in enumerate(findings.subgroups)])
    lines += _table("Systematic subgroups among the suspected label errors (not label noise)",
                    ["#", "group", "suspects", "why", "meta description"],
                    [[i + 1, g.description, g.size, g.why, g.meta_match.describe() if g.meta_match else "none"]
                     for i, g in enumerate(findings.suspect_groups)])
    lines += _table("Suspected label errors (cleanlab; not in a systematic subgroup, by self-confidence)",
                    ["#", "idx", "label", "model says", "p(label)", "over epochs", "neighbours failing"],
                    [[i + 1, e.idx, e.label, e.suggested, f"{e.self_confidence:.3f}", _share(e.mean_confidence, 3),
                      _share(e.neighbours_failing)] for i, e in enumerate(findings.label_issues)])
    if findings.data_map is not None:
        counts, failing = findings.data_map.counts, findings.data_map.failures
        lines += ["", f"Data map over validation epochs {findings.data_map.epochs}: " + ", ".join(
            f"{kind} {counts[kind]} ({failing[kind]} fail)" for kind in counts)]
    lines += _table("Restate the failure (computed from the model's output: never a cause)", ["column", "why"],
                    [[r.column, r.why] for r in findings.restatements])
    lines += _table("Where NaN/Inf first appears", ["#", "module", "type", "datapoints"],
                    [[i + 1, o.module, o.module_type, o.count] for i, o in enumerate(findings.nan_origins)])
    lines += _table("Dead units (a summary with one value for every datapoint)", ["#", "column", "value"],
                    [[i + 1, d.column, f"{d.value:g}"] for i, d in enumerate(findings.dead_units)])
    return "\n".join(lines)


def _family(title: str, family: FamilyFindings) -> list[str]:
    lines = _table(f"{title}: slices that fail more than the rest",
                   ["#", "slice", "size", "fail inside", "fail outside", "also / in meta terms"],
                   [[i + 1, s.description, s.size, f"{s.failure_rate:.0%}", f"{s.rest_failure_rate:.0%}", _words(s)]
                    for i, s in enumerate(family.slices)])
    tested = family.separators_tested
    return lines + _table(f"{title}: separating quantities (AUROC failures vs passes; Mann-Whitney p < 0.05/{tested}, "
                          f"{tested} quantities tested, a family of units counting once)",
                          ["#", "quantity", "AUROC", "direction", "best units / in meta terms"],
                          [[i + 1, s.column, f"{s.auroc:.3f}", s.direction, _units(s)]
                           for i, s in enumerate(family.separators)])


def _words(found: Any) -> str:
    """A slice's other descriptions, its meta match, what the model shows of it, its NaN origin."""
    parts = [f"also: {'; '.join(found.also)}"] if found.also else []
    if found.family == "internals":
        parts.append(found.meta_match.describe() if found.meta_match else
                     f"no meta column describes it; examples {' '.join(map(str, found.examples))}")
    parts += [f"inside the model: {'; '.join(found.inside_model)}"] if found.inside_model else []
    parts += [f"NaN first appears in {found.nan_origin}"] if found.nan_origin else []
    return " | ".join(parts)


def _units(separator: Any) -> str:
    parts = [", ".join(f"{u.column} {u.auroc:.3f}" for u in separator.units)] if separator.units else []
    if separator.target.debugger is not None:
        parts.append(separator.meta_match.describe() if separator.meta_match else "no meta column describes it")
    return " | ".join(parts)


def _share(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if digits else f"{value:.0%}"


def _table(title: str, header: list[str], rows: list[list[Any]]) -> list[str]:
    if not rows:
        return ["", f"{title}: none"]
    cells = [header] + [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return ["", title] + ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                          for row in cells]


if __name__ == "__main__":
    sys.exit(main())
