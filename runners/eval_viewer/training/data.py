"""A run's training monitor file (``training_monitor.bin``) for the Training tab, read as a live run grows it, and
the version of what the tab draws (the monitor file and the profiler's summary).

One reader per run is kept (``TRAINING_LOGS``, at most ``MAX_RUNS``): each read takes only the frames the run
appended since the last one, so following a long run every few seconds costs its new rows, not the file. The
file is data like every run file: ``run_dir.training_log`` reads it bounded and checked.
"""

from __future__ import annotations

import os
import threading
from typing import Optional

from run_dir import RunDir
from run_dir.names import MONITOR_FILE
from run_dir.training_log import TrainingLog, TrainingLogReader
from runners.eval_viewer.shared.cache import BoundedCache
from runners.eval_viewer.shared.runs import Run

MAX_RUNS = 8


class _Reader:
    """A ``TrainingLogReader`` used by one callback at a time (Dash runs callbacks in several threads)."""

    def __init__(self, path: str) -> None:
        self.reader = TrainingLogReader(path)
        self.lock = threading.Lock()

    def read(self) -> TrainingLog:
        with self.lock:
            return self.reader.read()


class TrainingLogs:
    def __init__(self, max_runs: int = MAX_RUNS) -> None:
        self._readers: BoundedCache[_Reader] = BoundedCache(max_runs)

    @staticmethod
    def path(run: Run) -> str:
        return os.path.join(run.path, MONITOR_FILE)

    def version(self, run: Run) -> Optional[str]:
        """Changes whenever the run's file is appended to, cut or replaced; None when it has none."""
        return _file_version(self.path(run))

    def read(self, run: Run) -> TrainingLog:
        """The run's log; ``FileNotFoundError`` without a file, ``DebugDataError`` for one that is not a monitor
        file (a link, a FIFO, another format)."""
        path = self.path(run)
        return self._readers.get(path, lambda: _Reader(path)).read()


TRAINING_LOGS = TrainingLogs()


def tab_version(run: Run) -> str:
    """Changes whenever what the tab draws changes: the monitor file, or the profiler's summary written."""
    return f"{TRAINING_LOGS.version(run)}|{_file_version(RunDir(run.path).profiler_summary)}"


def _file_version(path: str) -> Optional[str]:
    try:
        stat = os.lstat(path)
    except OSError:
        return None
    return f"{stat.st_ino}-{stat.st_size}-{stat.st_mtime_ns}"
