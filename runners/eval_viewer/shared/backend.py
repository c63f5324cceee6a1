"""``ViewerBackend``: what the callbacks ask of the disk, with bounded caches per run and epoch.

Everything is keyed by file signatures (path, size, modification time), so a run
that is still training shows its new epochs and pages without a restart, and
memory stays bounded however many runs and epochs are browsed.
"""

from __future__ import annotations

import os
import time
from typing import Any, Optional, Union

import numpy as np

from analysis.findings import Findings
from debuggers.pages.errors import DebugDataError
from run_dir.errors import RunFileError
from run_dir.findings_file import read_findings_file
from run_dir.folder import run_of
from run_dir.names import DEBUGGER_DIR, EPOCH_TABLE_FILE, FINDINGS_FILE
from run_dir.tags_file import tags_version
from runners.eval_viewer.address.saved_views import SavedViews
from runners.eval_viewer.figures.context import Calibration
from runners.eval_viewer.shared.cache import BoundedCache
from runners.eval_viewer.shared.calibration import calibration_points
from runners.eval_viewer.shared.datasets import DatasetUnavailable, build_run_dataset, captured_folder, config_signature
from runners.eval_viewer.shared.debug import EpochDebug, EpochDebugError, index_signature, open_pages
from runners.eval_viewer.shared.findings import epoch_findings
from runners.eval_viewer.shared.runs import Discovery, Epoch, Run, discover_runs, list_epochs
from runners.eval_viewer.shared.scores import Scores, ScoresError, read_scores
from runners.eval_viewer.shared.table import TABLE_ERRORS, ScoresTable, Table, class_names, open_table


class ViewerBackend:
    """Runs found in ``log_dirs`` and cached access to their scores, datasets and debug outputs.

    At most ``max_debug_epochs`` epochs keep one page each in memory: four epochs side by side
    stay fast, and memory stays at a few pages whatever the runs' size. A datapoint's inputs come
    from what its run captured; ``trust_configs`` also lets the backend import the config file a
    run names to rebuild a dataset the run did not capture (that runs code: the user's opt-in). Named views of a
    run are kept in ``views_dir`` (``address/saved_views.py``); ``embedding_method`` is how the Embeddings tab maps
    a feature space (``analysis/projection.py``).
    """

    def __init__(self, log_dirs: list[str], max_datasets: int = 4, max_debug_epochs: int = 4,
                 max_scores: int = 16, trust_configs: bool = False, views_dir: Optional[str] = None,
                 embedding_method: str = "auto") -> None:
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.trust_configs = trust_configs
        self.embedding_method = embedding_method  # how the Embeddings tab maps a space: 'auto', 'umap' or 'pca'
        self._given_dirs = list(log_dirs)
        self._datasets: BoundedCache[Any] = BoundedCache(max_datasets)
        self._debug: BoundedCache[Union[EpochDebug, EpochDebugError, None]] = BoundedCache(max_debug_epochs)
        self._captured: BoundedCache[Union[EpochDebug, EpochDebugError, None]] = BoundedCache(max_datasets)
        self._scores: BoundedCache[Scores] = BoundedCache(max_scores)
        self._tables: BoundedCache[Table] = BoundedCache(max_scores)
        self._class_names: BoundedCache[dict] = BoundedCache(max_scores)
        self._binary: BoundedCache[frozenset] = BoundedCache(max_scores)
        self._calibration: BoundedCache[Calibration] = BoundedCache(max_scores)
        self._aggregated: BoundedCache[dict] = BoundedCache(4096)  # small: one dict of means per epoch
        self._findings: BoundedCache[Findings] = BoundedCache(max_debug_epochs)
        self.views = SavedViews(views_dir)
        self.discovery = discover_runs(self._given_dirs)
        self._discovered_at = time.monotonic()

    def refresh(self, max_age_s: float = 0.0) -> Discovery:
        """Look for runs again (new runs appear while the viewer is open), unless the last look is younger than
        ``max_age_s`` (many pages asking at once share one look)."""
        if time.monotonic() - self._discovered_at >= max_age_s:
            self.discovery = discover_runs(self._given_dirs)
            self._discovered_at = time.monotonic()
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

    def datapoint_version(self, run: Run, epoch: Epoch) -> tuple:
        """Changes whenever anything a datapoint of ``epoch`` is drawn from changes: the epoch's files, the
        run's captured inputs and (with ``trust_configs``) its config file. Drawn datapoints are kept by it."""
        config = config_signature(run) if self.trust_configs else None
        return self.version(epoch), index_signature(captured_folder(run)), config

    def scores(self, epoch: Epoch) -> Scores:
        """The epoch's scores; ``ScoresError`` when the file is missing or malformed."""
        if epoch.scores_path is None:
            raise ScoresError(f"{epoch.label} has no scores file yet: its validation is still running "
                              "or was interrupted; the debug outputs written so far can still be opened")
        return self._scores.get(_file_signature(epoch.scores_path), lambda: read_scores(epoch.scores_path))

    def table(self, epoch: Epoch) -> Table:
        """The epoch's datapoints as a table served a page at a time: its epoch table, else its scores file.
        When neither can be read, the datapoints with debug outputs (idx only, so they can still be opened)
        with the reason in ``roles['problem']``; the error itself when the epoch has no debug outputs either."""
        try:
            return self._tables.get(_table_signature(epoch), lambda: open_table(epoch.dir, lambda: self.scores(epoch)))
        except TABLE_ERRORS as exc:
            captured = sorted(self.debug_indices(epoch))
            if not captured:
                raise
            table = ScoresTable(Scores({}, {}, captured, {}))
            table.roles["problem"] = str(exc)
            return table

    def metrics(self, epoch: Epoch) -> list[str]:
        """Per-datapoint scores with a direction, to rank and colour by."""
        return _metrics(self.table(epoch))

    def higher_is_better(self, epoch: Epoch, metric: str) -> bool:
        return self.table(epoch).roles.get("higher_is_better", {}).get(metric, True)

    def class_names(self, epoch: Epoch) -> dict[int, str]:
        """Class id -> name of the epoch's labels and predictions (empty when the run does not name them)."""
        table = self.table(epoch)
        # keyed by the table itself (not its id, which a later table could reuse once this one is evicted)
        return self._class_names.get(table, lambda: class_names(table))

    def binary_scores(self, epoch: Epoch) -> frozenset[str]:
        """The epoch's scores whose every value is 0 or 1 (an accuracy): a percentile of one says nothing."""
        table = self.table(epoch)
        return self._binary.get(table, lambda: frozenset(
            name for name in _metrics(table) if not table.count([(name, "not in", [0, 1]), (name, "is not null")])))

    def calibration(self, epoch: Epoch) -> Calibration:
        """Each score the model predicts for itself beside the true one over the epoch (``calibration_points``)."""
        table = self.table(epoch)
        return self._calibration.get(table, lambda: calibration_points(table))

    def debug_indices(self, epoch: Epoch) -> set[int]:
        """Datapoints with debug outputs at ``epoch`` (empty when it has none or its index cannot be read)."""
        try:
            debug = self.debug(epoch)
            return debug.indices if debug else set()
        except (DebugDataError, OSError):  # the datapoint view shows why (``datapoint._debug``)
            return set()

    def aggregated(self, epoch: Epoch) -> dict[str, Optional[float]]:
        """Aggregated scores only (kept for many epochs: the chart over epochs needs all of them). With an
        epoch table, the mean of each per-datapoint score (one column read, not the whole scores file)."""
        table_path = os.path.join(epoch.dir, EPOCH_TABLE_FILE)
        if os.path.isfile(table_path):
            return self._aggregated.get(_file_signature(table_path), lambda: _means(self.table(epoch)))
        if epoch.scores_path is None:
            return {}
        key = _file_signature(epoch.scores_path)
        return self._aggregated.get(key, lambda: dict(read_scores(epoch.scores_path).aggregated))

    def findings(self, epoch: Epoch) -> Findings:
        """Why the epoch's datapoints fail: the findings stored after its validation, else computed now
        (``shared/findings.py``; seconds on a large epoch); once per version of its epoch table and of its run's tags
        (meta columns of the analysis), so a run still training, or tagged since, is analysed again.
        ``AnalysisError`` or ``EpochTableError`` when it cannot be."""
        return self._findings.get(_findings_key(epoch), lambda: epoch_findings(epoch.dir))

    def findings_ready(self, epoch: Epoch) -> Optional[Findings]:
        """The epoch's findings where they need no analysis now (kept from an earlier look, or stored and current),
        else None: for views that offer the findings without waiting for them."""
        kept = self._findings.peek(_findings_key(epoch))
        if kept is not None or not os.path.isfile(os.path.join(epoch.dir, FINDINGS_FILE)):
            return kept
        try:
            return self.findings(epoch) if read_findings_file(epoch.dir) is not None else None
        except (RunFileError, OSError):
            return None

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


def _findings_key(epoch: Epoch) -> tuple:
    path = os.path.join(epoch.dir, EPOCH_TABLE_FILE)
    table = _file_signature(path) if os.path.isfile(path) else (epoch.dir, None)
    return table, tags_version(run_of(epoch.dir))


def _table_signature(epoch: Epoch) -> tuple:
    """Changes when the epoch's table or scores file is rewritten; ``ScoresError`` when it has neither."""
    path = os.path.join(epoch.dir, EPOCH_TABLE_FILE)
    if os.path.isfile(path):
        return _file_signature(path)
    if epoch.scores_path is None:
        raise ScoresError(f"{epoch.label} has no scores file yet: its validation is still running "
                          "or was interrupted; the debug outputs written so far can still be opened")
    return _file_signature(epoch.scores_path)


def _metrics(table: Table) -> list[str]:
    directions = table.roles.get("higher_is_better", {})
    return [name for name in table.roles.get("scores", []) if name in directions]


def _means(table: Table) -> dict[str, Optional[float]]:
    values = table.values(_metrics(table))
    return {name: float(np.nanmean(column)) if np.isfinite(column).any() else None for name, column in values.items()}


def _file_signature(path: str) -> tuple[str, int, int]:
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise ScoresError(f"{path} cannot be read ({exc.strerror}); it was removed or is not readable") from exc
    return path, stat.st_size, stat.st_mtime_ns
