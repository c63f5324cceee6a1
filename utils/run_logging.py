"""One logger per run: to the console and to a log file in the work dir."""

from __future__ import annotations

import logging
import os


def get_run_logger(work_dir: str, file_name: str, rank: int = 0) -> logging.Logger:
    """A logger writing to ``work_dir/file_name``; ranks other than 0 only log warnings."""
    logger = logging.getLogger(f"lantern.{os.path.abspath(work_dir)}.{rank}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    for handler in list(logger.handlers):
        handler.close()
        logger.removeHandler(handler)
    fmt = logging.Formatter(f"%(asctime)s [rank {rank}] %(levelname)s %(message)s", "%H:%M:%S")
    name = file_name if rank == 0 else f"{os.path.splitext(file_name)[0]}_rank{rank}.log"
    file_handler = logging.FileHandler(os.path.join(work_dir, name))
    console = logging.StreamHandler()
    console.setLevel(logging.INFO if rank == 0 else logging.WARNING)
    for handler in (file_handler, console):
        handler.setFormatter(fmt)
        logger.addHandler(handler)
    return logger
