"""Eval viewer: the server's cost of one Datapoint panel of a real run (what a click costs before the browser).

For ``--datapoints`` datapoints of the run's last epoch with debug outputs, the panel the Datapoint tab's callback
builds (``draw_panel``: the captured item and its page read, the figures of the debuggers shown by default built and
turned into components) and the JSON Dash sends of it: CPU time of the building (``time.process_time``, steadier
than wall time on a loaded machine) and the bytes, medians. ``--baseline DIR`` measures the same in another checkout
(e.g. ``main`` before a change), in a process of its own, this file run there, for a side-by-side.

    python -m benchmarks.viewer_panel_cost --run logs/examples/promptable_segmentation_trainer [--datapoints 10]
        [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import plotly

from runners.eval_viewer.datapoint.view import draw_panel
from runners.eval_viewer.shared.backend import ViewerBackend


def panel_costs(run_dir: str, datapoints: int) -> dict[str, float]:
    """Median CPU milliseconds and kB of the panels of idx 10.. of the run's last epoch with debug outputs."""
    backend = ViewerBackend([run_dir])
    run = backend.run(os.path.abspath(run_dir))
    if run is None:
        raise SystemExit(f"{run_dir} is not a run the viewer can read: {'; '.join(backend.discovery.problems)}")
    epoch = [epoch for epoch in backend.epochs(run) if backend.debug(epoch) is not None][-1]
    draw_panel(backend, run, epoch, 0)  # imports, the dataset and the first page: once per run
    times, sizes = [], []
    for idx in range(10, 10 + datapoints):
        start = time.process_time()
        panel = draw_panel(backend, run, epoch, idx)
        times.append((time.process_time() - start) * 1e3)
        sizes.append(len(json.dumps(panel.body.to_plotly_json(), cls=plotly.utils.PlotlyJSONEncoder)) / 1e3)
    return {"ms": statistics.median(times), "kB": statistics.median(sizes), "load": os.getloadavg()[0]}


def baseline_costs(root: str, run_dir: str, datapoints: int) -> dict[str, float]:
    """``panel_costs`` in the checkout at ``root``: this file run there, its modules imported from there."""
    command = [sys.executable, os.path.abspath(__file__), "--run", os.path.abspath(run_dir),
               "--datapoints", str(datapoints), "--json"]
    done = subprocess.run(command, cwd=root, env=dict(os.environ, PYTHONPATH=root), check=True, capture_output=True,
                          text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a run with debug outputs, e.g. the segmentation example's")
    parser.add_argument("--datapoints", type=int, default=10)
    parser.add_argument("--baseline", help="another checkout measured alongside, in a process of its own")
    parser.add_argument("--json", action="store_true", help="print the medians as JSON (the baseline's run)")
    args = parser.parse_args()
    costs = {"this checkout": panel_costs(args.run, args.datapoints)}
    if args.json:
        print(json.dumps(costs["this checkout"]))
        return
    if args.baseline:
        costs["baseline"] = baseline_costs(args.baseline, args.run, args.datapoints)
    for name, cost in costs.items():
        print(f"{name:<14} panel built in {cost['ms']:6.0f} ms of CPU, {cost['kB']:6.0f} kB sent (medians of "
              f"{args.datapoints} datapoints; load {cost['load']:.1f})")


if __name__ == "__main__":
    main()
