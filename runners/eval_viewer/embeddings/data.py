"""What the Embeddings tab reads: an epoch's feature spaces (``analysis/feature_spaces.py``), each one's stored 2-D map
(``run_dir/embedding_file.py``), computed once, the first time it is asked for, by ``python -m runners.embeddings`` in
a process of its own (``MapJobs``: one at a time, at a lower priority; a map is never computed per request); what the
map is coloured by; a box or lasso drawn on it as the table's narrowing (which an address can name); and a
datapoint's nearest neighbours in the space.

A run folder the viewer cannot write keeps its maps in a folder of the viewer's own for as long as it runs.
"""

from __future__ import annotations

import atexit
import math
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import IO, Optional

import numpy as np

from analysis.epoch_table import EpochTable
from analysis.feature_spaces import Space, epoch_spaces, find_space
from analysis.projection import nearest
from debuggers.pages.file_format import CorruptPageError
from run_dir.embedding_file import EmbeddingMap, embedding_path, read_embedding
from run_dir.findings_file import outputs_signature
from runners.background_process import start_apart
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.cache import BoundedCache
from runners.eval_viewer.shared.debug import EpochDebugError
from runners.eval_viewer.shared.runs import Epoch
from runners.eval_viewer.shared.table import TABLE_ERRORS
from utils.errors import LanternUserError

PREFIX = "embedding:"  # a narrowing's key: 'embedding:<space>|box:x0,x1,y0,y1' or '...|lasso:x y;x y;...'
MAX_VERTICES = 400  # of a lasso, as an address holds it
DIGITS = 6  # significant digits of a selection's corners in an address
ERROR_LINES = 3
MAX_MAPS = 4  # read maps kept: ~20 MB each at 100,000 datapoints (50 components)
MAP_ERRORS = (LanternUserError, OSError, ValueError)  # what reading or computing a map can raise, with a message
_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?", re.I)


class SelectionError(LanternUserError):
    """A selection on the map that cannot be used (not computed yet, another space, a malformed shape)."""


@dataclass
class MapState:
    """The map of a space as it is now: drawn (``found``), being computed, or why not (``problem``)."""

    found: Optional[EmbeddingMap] = None
    computing: str = ""  # what is being computed, and for how long
    problem: str = ""


@dataclass
class _Job:
    key: tuple
    epoch_dir: str
    space: str
    out: str
    method: str
    started: float = 0.0
    process: Optional[subprocess.Popen] = None
    errors: Optional[IO] = None
    failed: str = ""


class MapJobs:
    """The stored maps (the last ``MAX_MAPS`` read kept), and those being computed: one process at a time, the rest
    waiting in turn; a failure is kept (and said) until its epoch changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[tuple, _Job] = {}
        self._maps: BoundedCache[EmbeddingMap] = BoundedCache(MAX_MAPS)
        self._scratch: Optional[str] = None

    def map_of(self, epoch_dir: str, space: Space, method: str, compute: bool = True) -> MapState:
        """The stored map of ``space``; else (``compute``) its computation started or followed."""
        signature = outputs_signature(epoch_dir)
        out = self._place(epoch_dir, space.key, signature)
        found = self._read(out, space.key, signature)
        if found is not None or not compute:
            return MapState(found)
        key = (epoch_dir, space.key, repr(signature))
        with self._lock:
            job = self._jobs.setdefault(key, _Job(key, epoch_dir, space.key, out, method))
            self._advance()
            done, failed, started = key not in self._jobs, job.failed, job.started
            waiting = job.process is None
        if done:
            found = self._read(out, space.key, signature)
            return MapState(found) if found is not None else MapState(
                problem=f"the map of {space.label} was computed but is not where it was written ({out})")
        if failed:
            return MapState(problem=f"the map of {space.label} could not be computed: {failed}")
        if waiting:
            return MapState(computing=f"the map of {space.label} waits for another map to be computed …")
        return MapState(computing=f"computing the map of {space.label} ({_method_name(method)}, once for this epoch; "
                                  f"{time.monotonic() - started:.0f} s so far) …")

    def _advance(self) -> None:
        """Collect the process that ended and start the next waiting job (under the lock)."""
        for job in list(self._jobs.values()):
            if job.process is not None and job.process.poll() is not None and job.errors is not None:
                job.errors.seek(0)
                said = job.errors.read().strip().splitlines()
                job.errors.close()
                job.errors = None
                if job.process.returncode != 0:
                    job.failed = " | ".join(said[-ERROR_LINES:]) or f"exit status {job.process.returncode}"
                else:
                    del self._jobs[job.key]
        if any(job.process is not None and job.errors is not None for job in self._jobs.values()):
            return
        waiting = next((job for job in self._jobs.values() if job.process is None and not job.failed), None)
        if waiting is not None:
            waiting.errors = tempfile.TemporaryFile("w+")
            waiting.started = time.monotonic()
            try:
                waiting.process = start_apart("runners.embeddings", [
                    "--run", waiting.epoch_dir, f"--space={waiting.space}", "--method", waiting.method,
                    "--out", waiting.out], waiting.errors)
            except OSError as exc:
                waiting.failed = f"the computation could not start ({exc})"

    def _place(self, epoch_dir: str, key: str, signature: list) -> str:
        """Where the map is stored: in the epoch's folder, or, where the viewer cannot write there, in a folder of
        the viewer's own (named by the epoch's signature too: an epoch rewritten is mapped again)."""
        stored = embedding_path(epoch_dir, key)
        folder = os.path.dirname(stored)
        if os.access(folder if os.path.isdir(folder) else epoch_dir, os.W_OK) and not os.path.islink(folder):
            return stored
        with self._lock:
            if self._scratch is None:
                self._scratch = tempfile.mkdtemp(prefix="lantern-maps-")
                atexit.register(shutil.rmtree, self._scratch, ignore_errors=True)
        name = os.path.basename(embedding_path(f"{epoch_dir}|{signature!r}", key))
        return os.path.join(self._scratch, name)

    def _read(self, path: str, key: str, signature: list) -> Optional[EmbeddingMap]:
        try:
            status = os.stat(path)
        except OSError:
            return None
        found = self._maps.get((path, status.st_size, status.st_mtime_ns, repr(signature)),
                               lambda: read_embedding(path, key, signature) or _STALE)
        return None if found is _STALE else found


_STALE = EmbeddingMap(np.zeros(0, np.int64), np.zeros((0, 2), np.float32), np.zeros((0, 1), np.float32))
MAP_JOBS = MapJobs()


def spaces_of(backend: ViewerBackend, epoch: Epoch) -> list[Space]:
    """The epoch's feature spaces; none where it has no epoch table (an older run: no colours, no spaces)."""
    table = backend.table(epoch)
    if not isinstance(table, EpochTable):
        return []
    return epoch_spaces(table, _first_outputs(backend, epoch))


def _first_outputs(backend: ViewerBackend, epoch: Epoch) -> Optional[dict]:
    """The debug outputs of the epoch's first captured datapoint (its page, which the viewer reads anyway)."""
    try:
        debug = backend.debug(epoch)
        return debug.get(min(debug.indices)) if debug is not None and debug.indices else None
    except (EpochDebugError, CorruptPageError, OSError):
        return None


def chosen_space(backend: ViewerBackend, epoch: Epoch, key: Optional[str]) -> tuple[list[Space], Optional[Space]]:
    """The epoch's spaces and the one ``key`` names (else the first)."""
    spaces = spaces_of(backend, epoch)
    return spaces, next((s for s in spaces if s.key == key), spaces[0] if spaces else None)


def rows_in(sorted_idx: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Each of ``idx``'s place in ``sorted_idx`` (a map's or a table's idx, in order), -1 where it has none."""
    idx = np.asarray(idx, dtype=np.int64)
    at = np.searchsorted(sorted_idx, idx)
    inside = at < len(sorted_idx)
    hit = np.zeros(len(idx), dtype=bool)
    hit[inside] = sorted_idx[at[inside]] == idx[inside]
    return np.where(hit, at, -1)


def neighbours(found: EmbeddingMap, idx: int, count: int = 10) -> tuple[list[int], list[float]]:
    """The ``count`` datapoints nearest to ``idx`` in the map's space (its leading components), nearest first;
    ``SelectionError`` when the map does not hold it."""
    row = int(rows_in(found.idx, np.array([idx]))[0])
    if row < 0:
        raise SelectionError(f"datapoint {idx} is not in this map (no vector of this space was captured for it)")
    rows, distances = nearest(found.components, row, count)
    return found.idx[rows].tolist(), distances.tolist()


# ----------------------------------------------------------------- a selection on the map, and in an address
def shape_key(space: str, shape: str) -> str:
    return f"{PREFIX}{space}|{shape}"


def parse_shape(text: str) -> tuple[str, np.ndarray]:
    """``box:x0,x1,y0,y1`` or ``lasso:x y;x y;...`` as ('box', [x0, x1, y0, y1]) or ('lasso', (n, 2) vertices);
    ``SelectionError`` says what is wrong."""
    kind, _, body = text.partition(":")
    if kind == "box":
        numbers = [_finite(part) for part in body.split(",")]
        if len(numbers) == 4:
            return kind, np.array(numbers)
    elif kind == "lasso":
        points = [[_finite(value) for value in point.split(" ")] for point in body.split(";")]
        if 3 <= len(points) <= MAX_VERTICES and all(len(point) == 2 for point in points):
            return kind, np.array(points)
    raise SelectionError(f"{text[:60]!r} is not a box (box:x0,x1,y0,y1) or a lasso (lasso:x y;x y;... of 3 to "
                         f"{MAX_VERTICES} points) on the map")


def inside(xy: np.ndarray, kind: str, shape: np.ndarray) -> np.ndarray:
    """Which points of ``xy`` lie in the box or the lasso (even-odd rule, as plotly selects)."""
    x, y = xy[:, 0].astype(np.float64), xy[:, 1].astype(np.float64)
    if kind == "box":
        x0, x1, y0, y1 = shape
        return (x >= min(x0, x1)) & (x <= max(x0, x1)) & (y >= min(y0, y1)) & (y <= max(y0, y1))
    held = np.zeros(len(xy), dtype=bool)
    for (ax, ay), (bx, by) in zip(shape, np.roll(shape, -1, axis=0)):
        crosses = (ay > y) != (by > y)
        with np.errstate(divide="ignore", invalid="ignore"):
            at = ax + (y - ay) * (bx - ax) / (by - ay)
        held ^= crosses & (x < at)
    return held


def selection_narrowing(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str],
                        key: str) -> Optional[dict]:
    """The table's narrowing a key names (``embedding:<space>|<shape>``, as an address holds it): the datapoints
    inside the shape on the stored map; ``SelectionError`` when it cannot be made."""
    run = backend.run(run_path)
    epoch = backend.epoch(run, epoch_key) if run else None
    if epoch is None:
        return None
    space_key, _, shape = key.removeprefix(PREFIX).rpartition("|")
    kind, geometry = parse_shape(shape)
    try:
        space = find_space(spaces_of(backend, epoch), space_key)
        found = MAP_JOBS.map_of(epoch.dir, space, backend.embedding_method, compute=False).found
    except (*TABLE_ERRORS, *MAP_ERRORS) as exc:
        raise SelectionError(str(exc)) from None
    if found is None:
        raise SelectionError(f"the map of {space.label} is not computed yet: open the Embeddings tab to compute it, "
                             "then select again")
    chosen = found.idx[inside(found.xy, kind, geometry)].tolist()
    return {"run": run_path, "epoch": epoch_key, "idx": chosen, "finding": shape_key(space.key, shape),
            "what": f"{len(chosen)} datapoints in a {kind} on the map of {space.label}"}


def _finite(text: str) -> float:
    text = text.strip()
    if not _NUMBER.fullmatch(text) or not math.isfinite(float(text)):
        raise SelectionError(f"{text[:20]!r} is not a number on the map")
    return float(text)


def _method_name(method: str) -> str:
    return {"pca": "PCA", "umap": "UMAP"}.get(method, "UMAP where installed, else PCA")

