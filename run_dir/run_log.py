"""One logger per run: to the console and to a log file in the work dir."""

from __future__ import annotations

import logging
import os
from typing import Optional


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
