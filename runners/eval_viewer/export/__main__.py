"""``python -m runners.eval_viewer.export --run RUN --idx 3 7 12 --out report.html``: the HTML report of chosen
datapoints (``report.export_report``); ``--trust-configs`` also lets it import the config file the run names to rebuild
inputs the run did not capture."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional

from runners.eval_viewer.export.report import export_report
from runners.eval_viewer.shared.backend import ViewerBackend
from utils.errors import LanternUserError


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runners.eval_viewer.export",
                                     description="A self-contained HTML report of chosen datapoints: their scores, "
                                                 "labels, predictions and debug outputs.")
    parser.add_argument("--run", required=True, help="trainer or evaluator work dir")
    parser.add_argument("--epoch", type=int, default=None, help="trainer epoch (default: latest with debug outputs)")
    parser.add_argument("--idx", type=int, nargs="+", required=True, help="dataset indices of the datapoints")
    parser.add_argument("--out", default="report.html", help="HTML file to write")
    parser.add_argument("--trust-configs", action="store_true",
                        help="import the config file the run names to rebuild inputs it did not capture "
                             "(runs code: only for runs you trust)")
    args = parser.parse_args(argv)
    try:
        backend = ViewerBackend([args.run], trust_configs=args.trust_configs)
        path = export_report(args.run, args.idx, args.out, args.epoch, backend)
    except LanternUserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"Report written to {os.path.abspath(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
