"""Records every debugger output can hold, and what each output kind is called.

Ready-made debuggers return a dict with a ``'kind'`` key so that a view can be
chosen without guessing from shapes; outputs of user debuggers without one are
shown generically. Errors and layers that did not run are records too, so a
datapoint's outputs always say what happened to every debugger.
"""

from __future__ import annotations

import traceback
from typing import Any

KIND_ERROR = "error"
KIND_NOT_RUN = "not_run"


def error_output(exc: BaseException) -> dict[str, Any]:
    """What a debugger that raised leaves for the datapoints of its batch."""
    return {
        "kind": KIND_ERROR,
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(exc)[-3:]),
    }


def not_run_output(message: str) -> dict[str, Any]:
    return {"kind": KIND_NOT_RUN, "message": message}


def is_shared_record(output: Any) -> bool:
    """Error and not-run records are the same for every datapoint of a batch."""
    return isinstance(output, dict) and output.get("kind") in (KIND_ERROR, KIND_NOT_RUN)


class PerDatapoint(list):
    """A list with one entry per datapoint of the batch (plain lists are shared)."""
