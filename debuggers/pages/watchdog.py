"""``StallWatchdog``: notice a debugger call or a page write that makes no progress, say so early, end it.

A debugger that waits forever inside its call, or a disk that hangs under the
page writer, would otherwise stall a run silently. The debugger wraps each such
step in ``watch(...)``; a daemon thread looks at the open steps about once a
second and

* after ``warn_after_s`` logs which step (debugger name and phase) is stuck, with
  the stacks of the threads involved (``sys._current_frames``), once per step;
* after ``stall_timeout_s``, for a step that may be interrupted (a debugger's
  call on the main thread), sends SIGINT to the main thread: the blocked call
  wakes with ``KeyboardInterrupt`` (also where the process ignores SIGINT, as a run
  started in the background by a script does), which ``watch`` turns into a ``DebuggerStallError``
  naming the step. Nothing of the current epoch is marked done, so the same command
  resumes. Page writes are not interrupted: the page writer gives up by itself after
  the same ``stall_timeout_s``, and capture stops for that epoch while training goes on.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from utils.errors import LanternUserError

DEFAULT_STALL_TIMEOUT_S = 120.0
WARN_FRACTION = 0.25  # log a stuck step after a quarter of the timeout
_POLL_S = 0.5
_IDLE_EXIT_S = 10.0  # the watching thread ends after this long without steps (a later step restarts it)


class DebuggerStallError(LanternUserError):
    """A debugger call made no progress for ``stall_timeout_s``; the run stops, resumable."""


@dataclass
class _Step:
    what: str
    thread: threading.Thread
    started: float
    interrupt: bool
    extra_threads: tuple[str, ...]
    warned: bool = False
    interrupted: bool = False
    stack: str = field(default="")


class StallWatchdog:
    """Watches steps of one ``SequentialDebugger``; see the module docstring."""

    def __init__(self, stall_timeout_s: float, logger: logging.Logger) -> None:
        self.stall_timeout_s = stall_timeout_s
        self.warn_after_s = stall_timeout_s * WARN_FRACTION
        self.logger = logger
        self._steps: dict[int, _Step] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._last_step_end = time.monotonic()

    @contextmanager
    def watch(self, what: str, interrupt: bool, extra_threads: tuple[str, ...] = ()) -> Iterator[None]:
        """Watch the step ``what`` run by the calling thread; ``interrupt``: end it after the timeout
        (main thread only). ``extra_threads`` names threads whose stacks explain a stall (the page writer)."""
        step = _Step(what, threading.current_thread(), time.monotonic(),
                     interrupt and threading.current_thread() is threading.main_thread(), extra_threads)
        with self._lock:
            self._steps[id(step)] = step
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lantern-stall-watchdog", daemon=True)
                self._thread.start()
        try:
            with _sigint_raises(step):
                yield
        except KeyboardInterrupt:
            if not step.interrupted:
                raise
            raise DebuggerStallError(
                f"{what} made no progress for {self.stall_timeout_s:g} s and was stopped. Where it was stuck:\n"
                f"{step.stack}Fix it (or, if it is only slow, raise 'stall_timeout_s' in the debugger config: "
                f"config['debugger']['args']['stall_timeout_s']), then run the same command again: training "
                "resumes after the last finished epoch") from None
        finally:
            with self._lock:
                del self._steps[id(step)]
                self._last_step_end = time.monotonic()

    def close(self) -> None:
        """Stop the watching thread (a later ``watch`` starts it again)."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            self._stop.set()
            thread.join()
            self._stop.clear()

    def _run(self) -> None:
        while not self._stop.wait(min(_POLL_S, self.warn_after_s)):
            now = time.monotonic()
            with self._lock:
                if not self._steps and now - self._last_step_end > _IDLE_EXIT_S:
                    self._thread = None  # decided under the lock: a new step starts a new thread
                    return
                for step in list(self._steps.values()):
                    self._check(step, now - step.started)
        with self._lock:
            self._thread = None

    def _check(self, step: _Step, elapsed: float) -> None:
        if elapsed >= self.warn_after_s and not step.warned:
            step.warned = True
            step.stack = _stacks(step)
            ending = ("it is stopped" if step.interrupt else "the page writer gives up and capture stops for this "
                      "epoch") + f" after {self.stall_timeout_s:g} s (config['debugger']['args']['stall_timeout_s'])"
            self.logger.warning(f"{step.what} has made no progress for {elapsed:.0f} s; {ending}. "
                                f"Where it is:\n{step.stack}")
        if step.interrupt and elapsed >= self.stall_timeout_s and not step.interrupted:
            step.interrupted = True
            step.stack = _stacks(step)
            self.logger.error(f"{step.what} made no progress for {elapsed:.0f} s: stopping the run")
            signal.pthread_kill(step.thread.ident, signal.SIGINT)


@contextmanager
def _sigint_raises(step: _Step) -> Iterator[None]:
    """While ``step`` runs, the watchdog's SIGINT raises ``KeyboardInterrupt`` whatever the process's own SIGINT
    handling: a run started in the background by a script inherits SIGINT ignored, and a user's handler may
    not raise. Any other SIGINT gets what was there before, which is back when the step ends."""
    previous = signal.getsignal(signal.SIGINT)
    if not step.interrupt or previous is signal.default_int_handler or previous is None:  # None: set outside Python
        yield
        return

    def handler(signum: int, frame: object) -> None:
        if step.interrupted:
            raise KeyboardInterrupt
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:  # what it would have done: end the process
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.raise_signal(signal.SIGINT)

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _stacks(step: _Step) -> str:
    """The stacks of the step's thread and of the threads named in ``extra_threads``."""
    frames = sys._current_frames()
    threads = [step.thread] + [t for t in threading.enumerate() if t.name in step.extra_threads]
    parts = []
    for thread in threads:
        frame = frames.get(thread.ident)
        if frame is not None:
            parts.append(f"  thread {thread.name}:\n" + "".join(traceback.format_stack(frame)))
    return "".join(parts)
