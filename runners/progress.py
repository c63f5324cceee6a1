"""A pass's progress: a bar on a terminal, a few log lines elsewhere.

tqdm redraws its bar with carriage returns many times a second: in a log redirected to a file (nohup, slurm) every
redraw is kept, hundreds of lines for one run against the log's dozens. So the bar is drawn only where stderr is a
terminal; elsewhere a pass that lasts longer than ``LOG_EVERY_S`` logs a line at most that often (the runner logs
each epoch's result anyway).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, Optional

from tqdm import tqdm

LOG_EVERY_S = 300.0


class Progress:
    """The batches of ``iterable``, with the bar or the log lines above; ``shown`` False: neither (ranks other
    than 0)."""

    def __init__(self, iterable: Iterable, desc: str, logger: logging.Logger, shown: bool,
                 every_s: float = LOG_EVERY_S, terminal: Optional[bool] = None) -> None:
        self.iterable, self.desc, self._log, self.every_s = iterable, desc, logger, every_s
        terminal = sys.stderr.isatty() if terminal is None else terminal
        self._bar = tqdm(iterable, desc=desc, leave=False, disable=not (shown and terminal))
        self._logs = shown and not terminal
        self._note = ""

    def __iter__(self) -> Iterator[Any]:
        if not self._logs:
            yield from self._bar
            return
        total = _length(self.iterable)
        start = last = time.monotonic()
        for done, item in enumerate(self.iterable):
            yield item
            now = time.monotonic()
            if now - last >= self.every_s:
                last = now
                of = f"/{total}" if total is not None else ""
                self._log.info(f"{self.desc}: {done + 1}{of} batches in {now - start:.0f} s{self._note}")

    def note(self, **values: str) -> None:
        """Values shown beside the progress (the bar's postfix, the end of a log line)."""
        self._bar.set_postfix(values)
        self._note = ", " + ", ".join(f"{key} {value}" for key, value in values.items())


def _length(iterable: Iterable) -> Optional[int]:
    try:
        return len(iterable)  # type: ignore[arg-type]
    except TypeError:  # an IterableDataset's loader
        return None
