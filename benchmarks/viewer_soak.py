"""A soak of the eval viewer: clients requesting its pages and callbacks for minutes while a run trains and a
verification runs, with no error and the viewer's memory flat.

What runs, each in a process of its own (as users run them), over one temporary log folder:

- the viewer, ``python -m runners.eval_viewer --trust-configs``;
- a training run (the small planted-units config, ``tests/runners/planted_units_small_config.py``, with epochs
  enough to outlast the soak): new epochs appear while the clients read;
- verifications, one after another, of a finished run of the same config (``python -m runners.analyze --verify
  --trust-configs``): a model rebuilt and rerun on the same CPUs and files;
- ``--clients`` threads, each opening random datapoints of both runs as a page does, over HTTP: the layout for the
  address, the table's first 100 rows, the datapoint's panel.

It prints the viewer's RSS every ``--sample-s`` seconds, then the errors (a request answered other than 200, or
not answered), the p95 latency of each kind of request, and the RSS growth after the warm-up (the first
``--warmup-minutes``) against its target of at most 100 MB; verifications and epochs done beside them.

    python -m benchmarks.viewer_soak [--minutes 30] [--clients 20] [--warmup-minutes 5] [--sample-s 10]
    python -m benchmarks.viewer_soak --minutes 4 --warmup-minutes 1      # the quick version
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable

from run_dir import RunDir
from run_dir.names import EPOCH_TABLE_FILE, epoch_dir_name
from runners.eval_viewer.controls.ids import EPOCH_SELECT, RUN_SELECT
from runners.eval_viewer.datapoint.ids import DATAPOINT_PANEL, TAB_DATAPOINT
from runners.eval_viewer.shared.ids import SELECTED, TABS
from runners.eval_viewer.table.ids import TABLE, TABLE_QUERY
from tests.reliability.viewer_server import dependencies, post_callback, viewer_process
from tests.runs import REPO_ROOT

VALIDATION_SIZE = 400  # the planted-units config's
MAX_RSS_GROWTH_MB = 100
CONFIG = """import copy
from tests.runners.planted_units_small_config import config as small
config = copy.deepcopy(small)
config['work_dir'] = {work_dir!r}
config['epochs'] = {epochs}
config['scheduler']['args']['T_max'] = {epochs}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.viewer_soak", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--warmup-minutes", type=float, default=5.0)
    parser.add_argument("--sample-s", type=float, default=10.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lantern_soak_") as folder:
        logs = os.path.join(folder, "logs")
        finished = os.path.join(logs, "finished")
        _main_py(_config(folder, "finished", finished, 3)).wait()
        training = _main_py(_config(folder, "training", os.path.join(logs, "training"), 100_000))
        try:
            with viewer_process(["--log-dirs", logs, "--trust-configs", "--views-dir",
                                 os.path.join(folder, "views")], cwd=REPO_ROOT) as (url, _):
                return _soak(url, _child_pid("runners.eval_viewer"), logs, finished, args)
        finally:
            training.kill()
            training.wait(30)


def _config(folder: str, name: str, work_dir: str, epochs: int) -> str:
    path = os.path.join(folder, f"{name}_config.py")
    with open(path, "w") as file:
        file.write(CONFIG.format(work_dir=work_dir, epochs=epochs))
    return path


def _main_py(config: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "main.py", "--config-filepath", config], cwd=REPO_ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})


def _child_pid(module: str) -> int:
    """The pid of this process's child running ``python -m module``."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat, open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
                if parent == os.getpid() and module.encode() in cmdline.read():
                    return int(pid)
        except (OSError, ValueError):
            continue
    raise RuntimeError(f"no child process runs {module}")


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def _soak(url: str, viewer_pid: int, logs: str, finished: str, args: argparse.Namespace) -> int:
    start = time.monotonic()
    deadline = start + args.minutes * 60
    latencies: dict[str, list[float]] = defaultdict(list)
    errors: list[str] = []
    verifications = [0, 0]  # done, failed
    lock = threading.Lock()
    workers = [threading.Thread(target=_client, args=(url, logs, seed, deadline, latencies, errors, lock))
               for seed in range(args.clients)]
    workers.append(threading.Thread(target=_verifications, args=(finished, deadline, verifications)))
    for worker in workers:
        worker.start()
    samples = []
    while time.monotonic() < deadline:
        samples.append((time.monotonic() - start, _rss_mb(viewer_pid)))
        with lock:
            done, failed = sum(map(len, latencies.values())), len(errors)
        print(f"{samples[-1][0]:7.0f} s  viewer RSS {samples[-1][1]:7.1f} MB  requests {done}  errors {failed}  "
              f"epochs trained {len(_epochs(os.path.join(logs, 'training')))}", flush=True)
        time.sleep(min(args.sample_s, max(0.0, deadline - time.monotonic())))
    for worker in workers:
        worker.join()
    samples.append((time.monotonic() - start, _rss_mb(viewer_pid)))
    return _report(samples, latencies, errors, verifications, args)


def _client(url: str, logs: str, seed: int, deadline: float, latencies: dict[str, list[float]],
            errors: list[str], lock: threading.Lock) -> None:
    """Open random datapoints of both runs as a page does, until ``deadline``."""
    generator = random.Random(seed)
    base = url.rstrip("/")
    callbacks = {c["output"]: c for c in dependencies(base, timeout=120)}
    table = next(c for name, c in callbacks.items() if f"{TABLE}.getRowsResponse" in name)
    panel = next(c for name, c in callbacks.items() if f"{DATAPOINT_PANEL}.children" in name)
    while time.monotonic() < deadline:
        run = os.path.join(logs, generator.choice(["finished", "training"]))
        epochs = _epochs(run)
        if not epochs:
            time.sleep(1)
            continue
        epoch, idx = generator.choice(epochs), generator.randrange(VALIDATION_SIZE)
        asks = _page_requests(base, table, panel, run, epoch, idx)
        for kind, ask in asks.items():
            began = time.perf_counter()
            try:
                status = ask()
            except OSError as exc:
                status = f"{type(exc).__name__}: {exc}"
            with lock:
                latencies[kind].append(time.perf_counter() - began)
                if status != 200:
                    errors.append(f"{kind} of {os.path.basename(run)}/{epoch} idx {idx}: {status}")


def _page_requests(base: str, table: dict, panel: dict, run: str, epoch: str, idx: int) -> dict[str, Callable]:
    """What a page opened on datapoint ``idx`` of ``run``'s ``epoch`` asks, each giving its HTTP status."""
    query = {"run": run, "epoch": epoch, "metric": "accuracy", "version": None, "idx": None}
    rows = {f"{TABLE}.getRowsRequest": {"startRow": 0, "endRow": 100}, f"{TABLE_QUERY}.data": query}
    opened = {f"{SELECTED}.data": idx, f"{RUN_SELECT}.value": run, f"{EPOCH_SELECT}.value": epoch,
              f"{TABS}.value": TAB_DATAPOINT}
    return {"layout": lambda: _get(f"{base}/_dash-layout", f"{base}/?run={run}&epoch={epoch}&idx={idx}"),
            "table rows": lambda: post_callback(base, table, rows, timeout=120)[0],
            "datapoint panel": lambda: post_callback(base, panel, opened, timeout=120)[0]}


def _get(address: str, referer: str) -> int:
    with urllib.request.urlopen(urllib.request.Request(address, headers={"Referer": referer}), timeout=120) as answer:
        answer.read()
        return answer.status


def _epochs(run: str) -> list[str]:
    """The run's epochs whose table is written (a training run's grow as it goes)."""
    if not os.path.isdir(run):
        return []
    return [epoch_dir_name(number) for number in RunDir(run).epochs_holding(EPOCH_TABLE_FILE)]


def _verifications(run: str, deadline: float, counts: list[int]) -> None:
    """Verify every verifiable finding of ``run``, again and again until ``deadline``; count the runs that failed."""
    while time.monotonic() < deadline:
        done = subprocess.run([sys.executable, "-m", "runners.analyze", "--run", run, "--verify", "--trust-configs"],
                              cwd=REPO_ROOT, capture_output=True, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
        counts[0 if done.returncode == 0 else 1] += 1


def _report(samples: list[tuple[float, float]], latencies: dict[str, list[float]], errors: list[str],
            verifications: list[int], args: argparse.Namespace) -> int:
    warm = [rss for at, rss in samples if at >= args.warmup_minutes * 60]
    growth = max(warm) - warm[0] if warm else float("nan")
    print(f"\n{args.clients} clients for {args.minutes:g} min (load {os.getloadavg()[0]:.1f}): "
          f"{sum(map(len, latencies.values()))} requests, {len(errors)} errors; verifications {verifications[0]} "
          f"done, {verifications[1]} failed")
    for kind, times in latencies.items():
        p95 = statistics.quantiles(times, n=20)[-1] if len(times) > 1 else times[0]
        print(f"  {kind:16s} {len(times):6d} requests  median {statistics.median(times) * 1000:7.0f} ms  "
              f"p95 {p95 * 1000:7.0f} ms")
    print(f"viewer RSS: {samples[0][1]:.0f} MB at the start, {warm[0] if warm else float('nan'):.0f} MB after the "
          f"{args.warmup_minutes:g} min warm-up, {max(rss for _, rss in samples):.0f} MB at most, {samples[-1][1]:.0f} "
          f"MB at the end: {growth:+.0f} MB after the warm-up (target at most +{MAX_RSS_GROWTH_MB} MB)")
    for error in errors[:10]:
        print(f"  error: {error}")
    return 0 if not errors and growth <= MAX_RSS_GROWTH_MB and not verifications[1] else 1


if __name__ == "__main__":
    sys.exit(main())
