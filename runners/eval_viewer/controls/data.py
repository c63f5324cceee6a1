"""What the run and epoch pickers offer and choose, and the signatures of what the page shows from disk (so the page
asks again only when they change)."""

from __future__ import annotations

import hashlib
from typing import Optional

from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.runs import Discovery, Epoch, is_finished, last_modified, unfinished_reason
from runners.eval_viewer.shared.scores import ScoresError
from runners.eval_viewer.training.data import tab_version

UNFINISHED_MARK = "✗"  # before a run that never finished an epoch, listed after the others
MAX_REASON_CHARS = 140  # of the reason in the label; the option's tooltip has it whole


def default_epoch(epochs: list[Epoch]) -> Optional[str]:
    """The latest epoch with debug outputs (what a user opens the viewer for), else the latest."""
    with_debug = [e for e in epochs if e.has_debug]
    chosen = (with_debug or epochs or [None])[-1]
    return chosen.key if chosen else None


def epoch_option(epoch: Epoch) -> dict:
    suffix = " · debug" if epoch.has_debug else " · debug removed" if epoch.debug_removed else ""
    return {"label": epoch.label + suffix, "value": epoch.key}


def nearest_debug_epoch(epochs: list[Epoch], epoch: Epoch) -> Optional[Epoch]:
    """The epoch with debug outputs closest to ``epoch`` (the later one on a tie); None without any."""
    with_debug = [e for e in epochs if e.has_debug and e.number is not None]
    if epoch.number is None or not with_debug:
        return None
    return min(with_debug, key=lambda e: (abs(e.number - epoch.number), -e.number))


def epoch_state(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str]) -> str:
    """The signature of the run's epochs, the chosen epoch's files and what the Training tab draws."""
    run = backend.run(run_path)
    epochs = backend.epochs(run) if run else []
    epoch = next((e for e in epochs if e.key == epoch_key), None)
    try:
        version = backend.version(epoch) if epoch else None
    except ScoresError as exc:  # removed while listed: that too is a change
        version = str(exc)
    training = tab_version(run) if run else None  # the Training tab follows the run's monitor file and profile
    return digest(([epoch_option(e) for e in epochs], version, training))


def digest(value: object) -> str:
    return hashlib.sha1(repr(value).encode()).hexdigest()[:16]


def run_options(discovery: Discovery) -> list[dict]:
    """The runs by name, those that never finished an epoch (or an evaluation) last, apart, each saying why: its
    log's last line (the whole line as the option's tooltip)."""
    finished, unfinished = [], []
    for run in sorted(discovery.runs.values(), key=lambda run: run.name):
        label = f"{run.name} ({'evaluator' if run.is_evaluator else 'trainer'})"
        reason = unfinished_reason(run)
        if reason is None:
            finished.append({"label": label, "value": run.path})
        else:
            short = reason if len(reason) <= MAX_REASON_CHARS else reason[:MAX_REASON_CHARS - 1] + "…"
            unfinished.append({"label": f"{UNFINISHED_MARK} {label}: no epoch finished: {short}", "value": run.path,
                               "title": reason})
    return finished + unfinished


def most_recent_run(discovery: Discovery) -> Optional[str]:
    """The finished run written to last (what a user opens the viewer for right after a run), not one still at its
    first epochs; the run written to last when none is finished."""
    runs = list(discovery.runs.values())
    return max(runs, key=lambda run: (is_finished(run), last_modified(run))).path if runs else None


DISCOVERY_MAX_AGE_S = 2.0  # one look at the log dirs serves every page polling within this time


def disk_state(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str]) -> dict[str, str]:
    """Short signatures of what the page shows from disk: ``runs`` (the run list and discovery problems) and
    ``epoch`` (``epoch_state``). A run or epoch the viewer does not know counts as none: nothing asked here
    becomes a path."""
    discovery = backend.refresh(max_age_s=DISCOVERY_MAX_AGE_S)
    return {"runs": digest((run_options(discovery), discovery.problems)),
            "epoch": epoch_state(backend, run_path, epoch_key)}
