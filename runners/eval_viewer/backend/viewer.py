"""``ViewerBackend``: what the callbacks ask of the disk, with bounded caches per run and epoch.

Everything is keyed by file signatures (path, size, modification time), so a run
that is still training shows its new epochs and pages without a restart, and
memory stays bounded however many runs and epochs are browsed.
"""

from __future__ import annotations

import os
from typing import Any, Optional, Union

from debuggers.page_format import CorruptPageError
from runners.eval_viewer.backend.cache import BoundedCache
from runners.eval_viewer.backend.datasets import (
    DatasetUnavailable,
    build_run_dataset,
    captured_folder,
    config_signature,
)
from runners.eval_viewer.backend.debug import EpochDebug, EpochDebugError, index_signature, open_pages
from runners.eval_viewer.backend.initialization import DEBUGGER_DIR
from runners.eval_viewer.backend.runs import Discovery, Epoch, Run, discover_runs, list_epochs
from runners.eval_viewer.backend.scores import Scores, ScoresError, read_scores
from runners.eval_viewer.backend.table import ScoresTable


class ViewerBackend:
    """Runs found in ``log_dirs`` and cached access to their scores, datasets and debug outputs.

    At most ``max_debug_epochs`` epochs keep one page each in memory: four epochs side by side
    stay fast, and memory stays at a few pages whatever the runs' size. A datapoint's inputs come
    from what its run captured; ``trust_configs`` also lets the backend import the config file a
    run names to rebuild a dataset the run did not capture (that runs code: the user's opt-in).
    """

    def __init__(self, log_dirs: list[str], max_datasets: int = 4, max_debug_epochs: int = 4,
                 max_scores: int = 16, trust_configs: bool = False) -> None:
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.trust_configs = trust_configs
        self._given_dirs = list(log_dirs)
        self._datasets: BoundedCache[Any] = BoundedCache(max_datasets)
        self._debug: BoundedCache[Union[EpochDebug, EpochDebugError, None]] = BoundedCache(max_debug_epochs)
        self._captured: BoundedCache[Union[EpochDebug, EpochDebugError, None]] = BoundedCache(max_datasets)
        self._scores: BoundedCache[Scores] = BoundedCache(max_scores)
        self._tables: BoundedCache[ScoresTable] = BoundedCache(max_scores)
        self._aggregated: BoundedCache[dict] = BoundedCache(4096)  # small: one dict of means per epoch
        self.discovery = discover_runs(self._given_dirs)

    def refresh(self) -> Discovery:
        """Look for runs again (new runs appear while the viewer is open)."""
        self.discovery = discover_runs(self._given_dirs)
        return self.discovery

    def run(self, path: Optional[str]) -> Optional[Run]:
        return self.discovery.runs.get(path) if path else None

    def epochs(self, run: Run) -> list[Epoch]:
        return list_epochs(run)

    def epoch(self, run: Run, key: Optional[str]) -> Optional[Epoch]:
        return next((e for e in self.epochs(run) if e.key == key), None)

    def version(self, epoch: Epoch) -> str:
        """Changes whenever the epoch's scores or debug index are rewritten (a run still validating)."""
        scores = _file_signature(epoch.scores_path) if epoch.scores_path else None
        return repr((scores, index_signature(os.path.join(epoch.dir, DEBUGGER_DIR))))

    def scores(self, epoch: Epoch) -> Scores:
        """The epoch's scores; ``ScoresError`` when the file is missing or malformed."""
        if epoch.scores_path is None:
            raise ScoresError(f"{epoch.label} has no scores file yet: its validation is still running "
                              "or was interrupted; the debug outputs written so far can still be opened")
        return self._scores.get(_file_signature(epoch.scores_path), lambda: read_scores(epoch.scores_path))

    def table(self, epoch: Epoch) -> ScoresTable:
        """The epoch's datapoints as a table served a page at a time. Without a readable scores file, the
        datapoints with debug outputs (idx only, so they can still be opened); ``ScoresError`` without either."""
        try:
            scores = self.scores(epoch)
        except ScoresError:
            captured = sorted(self.debug_indices(epoch))
            if not captured:
                raise
            return ScoresTable(Scores({}, {}, captured, {}))
        return self._tables.get(_file_signature(epoch.scores_path), lambda: ScoresTable(scores))

    def higher_is_better(self, epoch: Epoch, metric: str) -> bool:
        return self.scores(epoch).higher_is_better.get(metric, True)

    def class_names(self, epoch: Epoch) -> list[str]:
        """Names of the label and prediction classes, by class id; empty when the run does not record them."""
        return []

    def debug_indices(self, epoch: Epoch) -> set[int]:
        """Datapoints with debug outputs at ``epoch`` (empty when it has none or its index cannot be read)."""
        try:
            debug = self.debug(epoch)
        except (CorruptPageError, OSError):
            return set()
        return debug.indices if debug else set()

    def aggregated(self, epoch: Epoch) -> dict[str, Optional[float]]:
        """Aggregated scores only (kept for many epochs: the chart over epochs needs all of them)."""
        if epoch.scores_path is None:
            return {}
        key = _file_signature(epoch.scores_path)
        return self._aggregated.get(key, lambda: dict(read_scores(epoch.scores_path).aggregated))

    def debug(self, epoch: Epoch) -> Optional[EpochDebug]:
        """The epoch's debug outputs (index only; pages open on lookup), None without any.

        ``EpochDebugError`` (kept in the cache like a value, so a broken epoch is not re-read on every
        click) says why the epoch's debug folder cannot be opened.
        """
        if not epoch.has_debug:
            return None
        return _pages(self._debug, os.path.join(epoch.dir, DEBUGGER_DIR))

    def captured(self, run: Run) -> Optional[EpochDebug]:
        """The datapoints the run captured (``idx -> {'inputs', 'labels', 'meta_info'}``), None without any;
        ``EpochDebugError`` when they cannot be read."""
        return _pages(self._captured, captured_folder(run))

    def dataset(self, run: Run) -> Any:
        """The run's dataset rebuilt from its config (only with ``trust_configs``); ``DatasetUnavailable``
        says why it cannot be."""
        if not self.trust_configs:
            raise DatasetUnavailable(f"{run.name}: the viewer imports no config file unless started with "
                                     "--trust-configs")
        return self._datasets.get((run.path, config_signature(run)), lambda: build_run_dataset(run, self.log_dirs))


def _pages(cache: BoundedCache, folder: str) -> Optional[EpochDebug]:
    """The cached page folder; a folder that cannot be opened is cached as its error (not re-read per click)."""
    pages = cache.get((folder, index_signature(folder)), lambda: _open_or_error(folder))
    if isinstance(pages, EpochDebugError):
        raise EpochDebugError(str(pages))  # a fresh one: re-raising the cached one would grow its traceback
    return pages


def _open_or_error(folder: str) -> Union[EpochDebug, EpochDebugError, None]:
    try:
        return open_pages(folder)
    except EpochDebugError as exc:
        return exc


def _file_signature(path: str) -> tuple[str, int, int]:
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise ScoresError(f"{path} cannot be read ({exc.strerror}); it was removed or is not readable") from exc
    return path, stat.st_size, stat.st_mtime_ns
