"""Print why a run's datapoints fail: meta causes first, then what the model does, subgroups, label suspects.

    python -m runners.analyze --run logs/examples/planted_failures_trainer [--epoch N] [--json] [--save]
    python -m runners.analyze --run RUN --verify [KEY ...] --trust-configs

The same findings as ``analysis.failures.analyze`` (for notebooks) and the viewer's Failures tab. ``--save``
stores them in the epoch's folder (``findings.json``), as the trainer does after each validation epoch, so the
viewer shows them at once. ``--verify`` gives findings a verdict, by intervention on the epoch's own model, or by a
held-out replication where none applies (``runners/verify.py``): it rebuilds the model from the config file the run
names, so it needs ``--trust-configs``. A run or table it cannot analyse gives one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from analysis.failures import FailureDefinition, Findings, analyze, resolve_epoch_dir
from analysis.finding_plans import NOT_VERIFIABLE
from analysis.findings import FamilyFindings
from analysis.intervention import Comparison, NotVerifiable
from analysis.replication import REPLICATED, Replication
from run_dir.names import FINDINGS_FILE
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
    parser.add_argument("--save", action="store_true", help="store the findings in the epoch's folder "
                                                            f"({FINDINGS_FILE}) for the viewer")
    parser.add_argument("--verify", nargs="*", metavar="KEY", default=None,
                        help="verify findings: by intervention on the epoch's model, else by a held-out "
                             "replication; the findings named (meta.slices-0, internals.separators-2, subgroups-0, "
                             "nan_origins-0, ...), or every one but label suspects, dead units and restatements")
    parser.add_argument(TRUST_FLAG, action="store_true", dest="trust_configs",
                        help="let --verify import the config file the run names (runs its code: only for runs you "
                             "trust)")
    parser.add_argument("--seed", type=int, default=0, help="seed of --verify's random control sets (default 0)")
    args = parser.parse_args(argv)
    failure = FailureDefinition(args.failure_metric, args.worst_fraction)
    try:
        findings = analyze(args.run, args.epoch, failure, args.min_size, args.top, save=args.save)
        verified = None if args.verify is None else verify_findings(
            resolve_epoch_dir(args.run, args.epoch), findings.to_dict(), args.verify or None, args.trust_configs,
            failure, args.seed)
    except LanternUserError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
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
    lines += _confusions(findings)
    lines += _family("Meta info (what the data says)", findings.meta)
    lines += _within_a_class(findings)
    lines += _family("Inputs (what the captured inputs hold)", findings.inputs) if findings.inputs.had_columns() else []
    lines += _family("Internals (what the model does)", findings.internals)
    lines += _table("Subgroups in captured feature spaces (a rare variant: failures that sit together and fail alike, "
                    "predicted as several classes; one of several labels is found among the failures no other "
                    "finding explains)",
                    ["#", "space", "kind", "size", "fail", "rest", "described by", "typical idx"],
                    [[i + 1, g.debugger, g.kind_name, g.size,
                      f"{g.failure_rate:.0%}", f"{g.rest_failure_rate:.0%}",
                      g.description + (f" | {g.class_note}" if g.class_note else ""),
                      " ".join(map(str, g.examples))]
                     for i, g in enumerate(findings.subgroups)])
    lines += _training_label_groups(findings)
    lines += _table("Systematic subgroups among the suspected label errors (not label noise)",
                    ["#", "group", "suspects", "why", "meta description"],
                    [[i + 1, g.description, g.size, g.why, g.meta_match.describe() if g.meta_match else "none"]
                     for i, g in enumerate(findings.suspect_groups)])
    lines += _table("Suspected label errors (cleanlab; not in a group; the most confident disagreement its neighbours "
                    "back first)",
                    ["#", "idx", "label", "model says", "p(label)", "margin", "over epochs", "neighbours labelled so",
                     "neighbours failing"],
                    [[i + 1, e.idx, e.label, e.suggested, f"{e.self_confidence:.3f}", _share(e.margin, 2),
                      _share(e.mean_confidence, 3), _share(e.neighbours_suggest), _share(e.neighbours_failing)]
                     for i, e in enumerate(findings.label_issues)])
    lines += [f"note: {findings.label_issues_note}"] if findings.label_issues_note else []
    if findings.data_map is not None:
        counts, failing = findings.data_map.counts, findings.data_map.failures
        lines += ["", f"Data map over validation epochs {findings.data_map.epochs}: " + ", ".join(
            f"{kind} {counts[kind]} ({failing[kind]} fail)" for kind in counts)]
        lines += [f"note: {findings.data_map.note}"] if findings.data_map.note else []
    lines += _table("Restate the failure (computed from the model's output: never a cause)", ["column", "why"],
                    [[r.column, r.why] for r in findings.restatements])
    lines += _table("Where NaN/Inf first appears", ["#", "module", "type", "datapoints"],
                    [[i + 1, o.module, o.module_type, o.count] for i, o in enumerate(findings.nan_origins)])
    lines += _table("Dead units (a summary with one value for every datapoint)", ["#", "column", "value"],
                    [[i + 1, d.column, f"{d.value:g}"] for i, d in enumerate(findings.dead_units)])
    return "\n".join(lines)


def _training_label_groups(findings: Findings) -> list[str]:
    """The systematic groups, each with what to do about it."""
    groups = findings.training_label_groups
    lines = _table("Systematic training-label groups: datapoints of one label predicted consistently as another class, "
                   "whose validation labels agree with their neighbours' (not label noise)",
                   ["#", "label → predicted", "size", "fail", "rest", "as predicted", "p(predicted)",
                    "neighbours share the label", "described by", "typical idx"],
                   [[i + 1, f"{g.label} → {g.predicted}", g.size, f"{g.failure_rate:.0%}", f"{g.rest_failure_rate:.0%}",
                     f"{g.consistency:.0%}", _share(g.confidence, 2), f"{g.neighbours_agree:.0%}", g.description,
                     " ".join(map(str, g.examples))] for i, g in enumerate(groups)])
    return lines + [f"#{i + 1}: check the TRAINING labels of datapoints like these ({g.failures} of {g.size}; e.g. "
                    f"{', '.join(map(str, g.examples[:3]))}): the model learnt '{g.predicted}' for them, most often "
                    f"from training labels that say so; if those say '{g.label}', what they share makes the model see "
                    f"'{g.predicted}'" for i, g in enumerate(groups)]
def _confusions(findings: Findings) -> list[str]:
    """The main confusions, first: what the model mistakes for what."""
    if findings.confusion is None:
        return []
    listed = sum(c.count for c in findings.confusions)
    return _table(f"Main confusions (label read as prediction; {listed} of the {findings.failures} failures)",
                  ["#", "label", "read as", "datapoints", "of the label", "most confident idx"],
                  [[i + 1, c.label, c.prediction, c.count, f"{c.share:.0%}", " ".join(map(str, c.examples))]
                   for i, c in enumerate(findings.confusions)])


def _within_a_class(findings: Findings) -> list[str]:
    """The slices within one class (a classifier's only), or why none."""
    if findings.confusion is None:
        return []
    lines = _table("Within a class: conditions that make one class fail more than the rest of it",
                   ["#", "class", "slice", "size", "fail inside", "rest of the class", "class fails"],
                   [[i + 1, c.label.describe(), " and ".join(x.describe() for x in c.conditions), c.size,
                     f"{c.failure_rate:.0%}", f"{c.rest_failure_rate:.0%}",
                     f"{c.class_failure_rate:.0%} of {c.class_size}"] for i, c in enumerate(findings.class_slices)])
    return lines + ([f"why none: {findings.class_no_slice.description}"] if findings.class_no_slice else [])


def _family(title: str, family: FamilyFindings) -> list[str]:
    lines = _table(f"{title}: slices that fail more than the rest",
                   ["#", "slice", "size", "fail inside", "fail outside", "also / in meta terms"],
                   [[i + 1, s.description, s.size, f"{s.failure_rate:.0%}", f"{s.rest_failure_rate:.0%}", _words(s)]
                    for i, s in enumerate(family.slices)])
    if family.no_slice is not None:
        lines.append(f"why none: {family.no_slice.description}")
    tested = family.separators_tested
    return lines + _table(f"{title}: separating quantities (AUROC failures vs passes; Mann-Whitney p < 0.05/{tested}, "
                          f"{tested} quantities tested, a family of units counting once)",
                          ["#", "quantity", "AUROC", "direction", "best units / twins / in meta terms"],
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
    parts += [found.class_note] if found.class_note else []
    return " | ".join(parts)


def _units(separator: Any) -> str:
    parts = [", ".join(f"{u.column} {u.auroc:.3f}" for u in separator.units)] if separator.units else []
    parts += [separator.twins_description] if separator.twins else []
    if separator.target.debugger is not None:
        parts.append(separator.meta_match.describe() if separator.meta_match else "no meta column describes it")
    parts += [separator.class_note] if separator.class_note else []
    return " | ".join(parts)


def _share(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if digits else f"{value:.0%}"


def format_verifications(results: list[Result]) -> str:
    """Each finding's verdict, by what it rests on: an intervention (what it did to the finding's failures, against
    the matched random set), a held-out replication (found on one half, tested on the other); then the findings
    no check can test, and why."""
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
    lines += [f"{r.key}: held out, {r.replication.verdict} ({r.replication.describe()})"
              + (": the finding is real, and what it names not shown to cause it" if r.replication.verdict == REPLICATED
                 else "") for r in done if r.replication is not None]
    replicated = [r for r in results if isinstance(r, Replication)]
    lines += _table("Replicated on held-out datapoints (found on one half of the epoch, tested on the other; no "
                    "intervention applies, or the one tried did not confirm it)",
                    ["key", "finding", "found on half A as", "on half B", "verdict"],
                    [[r.key, r.finding, r.found_as or "-", r.describe(), r.verdict] for r in replicated])
    lines += [f"{r.key}: {r.verdict}: {r.reason}" + (f" (tried first: {_tried(r.tried)})" if r.tried else "")
              for r in replicated]
    skipped = [r for r in results if isinstance(r, NotVerifiable)]
    lines += ["", "Skipped (no check can test them):"] + [f"{r.key} ({r.finding}): {r.reason}" for r in skipped] \
        + [f"suspected label errors, dead units and restatements: {'; '.join(NOT_VERIFIABLE.values())}"]
    return "\n".join(lines)


def _tried(tried: dict[str, Any]) -> str:
    counts = tried["finding_counts"]
    before, after = counts["fixed"] + counts["stayed_failing"], counts["broken"] + counts["stayed_failing"]
    return f"{tried['intervention']}: {before} → {after} failing of {sum(counts.values())}, {tried['verdict']}"


def _before_after(result: Verification) -> str:
    counts = result.comparison.finding
    return f"{counts.failures_before} → {counts.failures_after} of {counts.size}"


def _changes(comparison: Comparison) -> list[str]:
    """The finding's and the control's change in failure rate, each with its interval."""
    return [f"{comparison.finding.change:+.2f} {comparison.finding_interval}",
            f"{comparison.control_change:+.2f} {comparison.control_interval}"]


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else str(value)


def _table(title: str, header: list[str], rows: list[list[Any]]) -> list[str]:
    if not rows:
        return ["", f"{title}: none"]
    cells = [header] + [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return ["", title] + ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                          for row in cells]


if __name__ == "__main__":
    sys.exit(main())
