"""How ``main.py`` ends a run that stops: every stop, caught or not, is said on stderr and ends the run's log.

The log (``train.log``, ``eval.log``, ``train_rank<r>.log``) gets, as its last line, what stopped the process,
during which stage (start-up, epoch N training, validation or checkpoint, evaluation) and what to do: a run
started under nohup or slurm says why it ended. Exit codes:

- 2, a user error (``LanternUserError``): its one line says what to fix. Where the project's own code raised while
  Lantern set the run up (``UserCodeError``: a config entry's class, ``dataset[0]``), the traceback is in the log.
- 1, an error Lantern did not catch (the project's code raising mid-epoch, a strict debugger's failure, a bug):
  the traceback on stderr, as Python prints it, and in the log.
- 130, an interrupt (Ctrl-C); 143, SIGTERM (a scheduler's time limit or preemption, torchrun ending the other
  ranks after one failed, ``kill``), which ``raise_on_sigterm`` turns into ``Terminated`` in the main thread so
  that the run closes its files and says so. Only ``kill -9`` leaves the log as it was.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from typing import Any

from run_dir.run_log import log_path
from runners.base_runner import BaseRunner
from utils import distributed
from utils.errors import LanternUserError, UserCodeError, describe_exception, from_worker, user_message

USER_ERROR, UNCAUGHT_ERROR, INTERRUPTED, TERMINATED = 2, 1, 130, 143
_AGAIN = "once fixed, run the same command again"


class Terminated(BaseException):
    """SIGTERM arrived (see ``raise_on_sigterm``); a BaseException, as KeyboardInterrupt is, so that no
    ``except Exception`` on the way takes it for an error of its own."""


def raise_on_sigterm() -> None:
    """Make SIGTERM raise ``Terminated`` in the main thread, unless the process has a handler of its own."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminated)


def _terminated(signum: int, frame: Any) -> None:
    raise Terminated()


def report_stop(exc: BaseException, config: dict[str, Any], runner: Any) -> int:
    """Say why the run stopped, on stderr and in the run's log; return the exit code. ``runner``: the runner
    if it was built, else None."""
    built = runner if isinstance(runner, BaseRunner) else None
    stage = built.stage if built is not None else "start-up"
    code, message, trace = _describe(exc, built.resume_advice() if built is not None else _AGAIN)
    runner_cls = config.get("runner")
    log = None
    if isinstance(runner_cls, type) and issubclass(runner_cls, BaseRunner):
        if code in (UNCAUGHT_ERROR, TERMINATED) and distributed.env_world_size() > 1:
            message += _other_ranks(runner_cls.LOG_FILE)
        log = runner_cls.log_stop(config, message, getattr(built, "launch", None), stage, code, trace)
    rank = f" (rank {os.environ.get('RANK')})" if distributed.env_world_size() > 1 else ""
    if code == USER_ERROR:
        if trace and log is None:
            print(trace, end="", file=sys.stderr)
        print(f"error{rank}: {message}" + (f" (the traceback is in {log})" if trace and log else ""),
              file=sys.stderr)
    else:
        print(trace, end="", file=sys.stderr)
        print(f"error{rank}: stopped during {stage}: {message}" + (f" (also at the end of {log})" if log else ""),
              file=sys.stderr)
    return code


def _describe(exc: BaseException, advice: str) -> tuple[int, str, str]:
    """The exit code, the one-line message (what stopped the run and what to do) and the traceback to log."""
    if isinstance(exc, LanternUserError):
        cause = exc.__cause__ if isinstance(exc, UserCodeError) else None
        if cause is None and isinstance(exc, UserCodeError) and from_worker(exc):
            return USER_ERROR, user_message(exc), str(exc)  # the worker's traceback, as text
        return USER_ERROR, user_message(exc), _traceback(cause) if cause is not None else ""
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED, f"interrupted (KeyboardInterrupt: Ctrl-C); {advice}", ""
    if isinstance(exc, Terminated):
        return TERMINATED, ("terminated by SIGTERM (a scheduler's time limit or preemption, torchrun ending the "
                            f"other ranks after one failed, or kill); {advice}"), ""
    return UNCAUGHT_ERROR, (
        f"{describe_exception(exc)}. Lantern did not catch this error: the traceback ends where it was raised, "
        "in the project's code (the dataset, model, metric or a debugger: fix it there) or in Lantern's (please "
        f"report it with this log); {advice}"), _traceback(exc)


def _other_ranks(log_file: str) -> str:
    """Where to look when one of several processes stops: the others' collectives fail (gloo's 'Connection closed
    by peer') or torchrun ends them, so the first to stop is the one whose log says why."""
    world_size, rank = distributed.env_world_size(), int(os.environ.get("RANK", "0"))
    logs = [os.path.basename(log_path("", log_file, other)) for other in range(world_size) if other != rank]
    return (f". This process is one of {world_size} processes: the first rank to stop makes the others' "
            "collectives fail (gloo's 'Connection closed by peer') or torchrun end them, so the cause is in the log "
            f"whose stop is the earliest: read the other ranks' too ({', '.join(logs)}, beside this one)")


def _traceback(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))
