"""One logger per run: to the console and to a log file in the work dir; a log's last line read back as data."""

from __future__ import annotations

import logging
import os
import re
from typing import Optional

from run_dir.run_files import open_regular

TAIL_BYTES = 8192  # a stop line with its reason fits; a log is never read whole here
_RECORD_PREFIX = re.compile(r"^\d\d:\d\d:\d\d \[rank \d+\] ")


def get_run_logger(work_dir: str, file_name: str, rank: int = 0) -> logging.Logger:
    """A logger writing to ``work_dir/file_name``; ranks other than 0 only log warnings."""
    logger = logging.getLogger(f"lantern.{os.path.abspath(work_dir)}.{rank}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    for handler in list(logger.handlers):
        handler.close()
        logger.removeHandler(handler)
    file_handler = logging.FileHandler(log_path(work_dir, file_name, rank))
    console = logging.StreamHandler()
    console.setLevel(logging.INFO if rank == 0 else logging.WARNING)
    for handler in (file_handler, console):
        handler.setFormatter(_formatter(rank))
        logger.addHandler(handler)
    return logger


def append_to_log(work_dir: str, file_name: str, rank: int, level: int, message: str) -> Optional[str]:
    """Add one record, formatted as the run's logger does, to the rank's log file if the run has one, and to
    nothing else: what the caller also prints would reach the console twice. Returns the log's path if it was
    written. A log that cannot be written is left as it is (the caller says it elsewhere; a full disk must not
    end in a traceback)."""
    path = log_path(work_dir, file_name, rank)
    record = logging.makeLogRecord({"msg": message, "levelno": level, "levelname": logging.getLevelName(level)})
    try:
        if os.path.isfile(path):
            with open(path, "a", encoding="utf-8") as log:
                log.write(_formatter(rank).format(record) + "\n")
            return path
    except OSError:
        pass
    return None


def log_path(work_dir: str, file_name: str, rank: int) -> str:
    name = file_name if rank == 0 else f"{os.path.splitext(file_name)[0]}_rank{rank}.log"
    return os.path.join(work_dir, name)


def _formatter(rank: int) -> logging.Formatter:
    return logging.Formatter(f"%(asctime)s [rank {rank}] %(levelname)s %(message)s", "%H:%M:%S")


def last_log_line(path: str, max_chars: int = 400) -> Optional[str]:
    """The last non-empty line of the log at ``path`` without its time and rank (``ERROR process 12 stopped during
    start-up (exit code 2): ...``), at most ``max_chars``; None when there is no such regular file (a link or a
    FIFO is not opened) or it is empty. Only its last ``TAIL_BYTES`` are read."""
    try:
        fd = open_regular(path, "run log")
    except (OSError, ValueError):
        return None
    with open(fd, "rb") as log:
        size = os.fstat(fd).st_size
        log.seek(max(0, size - TAIL_BYTES))
        tail = log.read(TAIL_BYTES).decode("utf-8", errors="replace")
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    if not lines:
        return None
    line = _RECORD_PREFIX.sub("", lines[-1])
    return line if len(line) <= max_chars else line[:max_chars - 1] + "…"
