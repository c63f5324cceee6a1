"""Batched or per datapoint: how a debugger's output becomes each datapoint's.

A debugger written for Lantern returns its output for the whole batch with the batch first
(``debuggers/batch_split.py``). Code written for one datapoint per forward pass, as Pylon's examples are
(``float(output.mean())``, ``list(output.shape)``, ``attention.mean(dim=0)``), does not: run on a batch,
it describes the batch. Such a debugger runs **per datapoint**, on each datapoint's slice of what it
hooked (``ForwardDebugger.process_forward``) or of the datapoint (``BaseDebugger.__call__``), exactly as
at batch 1, and each datapoint's pages keep what it gave alone (``one_datapoint``). It also runs once on the
whole batch, as the seed calls it: that is what ``SequentialDebugger.__call__`` returns for it.

A debugger declares its mode with the class attribute ``batch_mode``: ``BATCHED`` or ``PER_DATAPOINT``.
Undeclared, ``BatchModeCheck`` finds it on the first batch of two or more datapoints by running it both
ways: batched only where that is proven to give each datapoint what it gives alone (``batched_verdict``),
per datapoint otherwise. At batch 1 any output is that datapoint's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

import numpy as np
import torch

from debuggers.base_debugger import BaseDebugger
from debuggers.batch_split import BatchContractError, split_batch
from debuggers.outputs import AloneOutputs, PerDatapoint, is_shared_record
from debuggers.pages.value_rules import UnsupportedOutputError
from debuggers.pages.values import to_page_value
from utils.errors import ConfigError

BATCHED = "batched"
PER_DATAPOINT = "per_datapoint"
MODES = (BATCHED, PER_DATAPOINT)
RTOL = 1e-5  # batched and alone agree to float rounding (in full float32): reductions may run in another order
DOCS = "docs/debugger.md, 'Batched or per datapoint'"
ALIKE = "every datapoint of the batch gave the same output: a value for the whole batch cannot be told from theirs"


@dataclass
class DatapointFailure:
    """What a debugger raised on one datapoint alone; ``SequentialDebugger`` records it under that datapoint."""

    error: Exception
    position: int  # in the batch
    hint: str = ""  # what to do, where the debugger ran on the whole batch


@dataclass
class BatchFailure:
    """What a debugger run per datapoint raised on the whole batch: only its own return value is lost, its pages hold
    what each datapoint gave alone."""

    error: Exception


class Ran(NamedTuple):
    """A debugger's run on a batch: ``returned``, what it returned for the whole batch (as the seed's
    ``SequentialDebugger`` gives it back; a ``BatchFailure`` where that raised), ``pages``, what its pages get:
    the same where it is batch-first, else ``AloneOutputs`` of each datapoint's own output, and ``columns``, its
    ``summary_columns`` of ``pages`` where they were computed already (in a forward hook), else None."""

    returned: Any
    pages: Any
    columns: Any = None


def declared_mode(debugger: BaseDebugger) -> Optional[str]:
    """The debugger's ``batch_mode`` (class or instance attribute), checked; None when it declares none."""
    mode = getattr(debugger, "batch_mode", None)
    if mode is not None and mode not in MODES:
        raise ConfigError(f"{type(debugger).__name__}.batch_mode is {mode!r}; declare 'batched' (its outputs have "
                          "the batch first), 'per_datapoint' (written for one datapoint per forward pass: Lantern "
                          "runs it on each datapoint alone) or leave it None (Lantern finds out; see "
                          f"{DOCS})")
    return mode


def calls_alone(debugger: BaseDebugger) -> bool:
    """Whether ``SequentialDebugger`` runs this (non-forward) debugger's ``__call__`` per datapoint when its output
    is not batch-first: one that installs hooks of its own (``attach``) sees the batch through them, so only its
    declaration can make it run per datapoint."""
    mode = declared_mode(debugger)
    return mode == PER_DATAPOINT or (mode is None and type(debugger).attach is BaseDebugger.attach)


def batch_mode_check(debugger: BaseDebugger) -> BatchModeCheck:
    """The debugger's ``BatchModeCheck``, kept on it for the whole run (its mode does not change with epochs)."""
    check = vars(debugger).get("_batch_mode_check")
    if check is None:
        check = debugger._batch_mode_check = BatchModeCheck(declared_mode(debugger))
    return check


class BatchModeCheck:
    """Runs one debugger batched or per datapoint, deciding which on its first batch of two or more when undeclared.

    ``run(batched, alone, batch_size)``: ``batched()`` computes the output of the whole batch, ``alone(i)`` that of
    datapoint i alone (as at batch 1); it gives both (``Ran``). The decision is kept in ``mode``; ``news`` says what
    was decided and why, once, for the run's log.
    """

    def __init__(self, declared: Optional[str]) -> None:
        self.mode = declared
        self.news: Optional[str] = None

    def run(self, batched: Callable[[], Any], alone: Callable[[int], Any], batch_size: int) -> Ran:
        if self.mode == BATCHED:
            together = batched()
            return Ran(together, together)
        if batch_size == 1:  # the batch is the datapoint alone: one call gives both
            together = _attempt(batched)
            failed = isinstance(together, BatchFailure)
            return Ran(together, AloneOutputs([DatapointFailure(together.error, 0) if failed
                                               else one_datapoint(together)]))
        if self.mode == PER_DATAPOINT:
            return Ran(_attempt(batched), AloneOutputs(_alone(alone, i) for i in range(batch_size)))
        return self._decide(batched, alone, batch_size)

    def _decide(self, batched: Callable[[], Any], alone: Callable[[int], Any], batch_size: int) -> Ran:
        with full_float32():
            together = _attempt(batched)
            apart = AloneOutputs(_alone(alone, i) for i in range(batch_size))
        failed = together.error if isinstance(together, BatchFailure) else None
        if all(isinstance(value, DatapointFailure) for value in apart):  # nothing to compare: a later batch decides
            if failed is not None:
                raise failed
            for value in apart:
                value.hint = ("it runs on the whole batch but not on one datapoint alone: declare batch_mode = "
                              "'batched' on its class if its outputs have the batch first")
            return Ran(together, apart)
        try:
            reason = (f"it fails on the whole batch ({type(failed).__name__}: {failed}) and runs on each datapoint "
                      "alone" if failed is not None else batched_verdict(together, apart, batch_size))
        except UnsupportedOutputError:  # a page cannot hold it either way: refused as it is, decided later
            return Ran(together, together)
        self.mode = PER_DATAPOINT if reason else BATCHED
        self.news = _news(reason, batch_size)
        return Ran(together, apart if reason else together)

    def take_news(self) -> Optional[str]:
        news, self.news = self.news, None
        return news


@contextmanager
def full_float32() -> Iterator[None]:
    """TF32 off for convolutions and matmuls while the two ways are compared, then the user's settings back.

    A GPU's TF32 convolutions (PyTorch's default) round differently at batch 8 than at batch 1: a batch-first
    input gradient differed by 3-8% of its maximum on an H200 (by 1e-6 with TF32 off), far beyond ``RTOL``, and
    would have run per datapoint for the whole run. Torch's legacy switches set its newer per-operator ones too,
    so both are saved and put back as they were. Where they disagree already (set through both APIs), reading
    them raises, and they are left alone."""
    backends = torch.backends
    newer = (backends.cuda.matmul, backends.cudnn.conv, backends.cudnn.rnn)
    try:
        saved = backends.cudnn.allow_tf32, torch.get_float32_matmul_precision()
    except RuntimeError:
        saved = None
    if saved is None:
        yield
        return
    saved_newer = [backend.fp32_precision for backend in newer]
    backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        backends.cudnn.allow_tf32 = saved[0]
        torch.set_float32_matmul_precision(saved[1])
        for backend, value in zip(newer, saved_newer):
            backend.fp32_precision = value


def _news(reason: Optional[str], batch_size: int) -> str:
    """What the run's log says of a decision."""
    if reason is None:
        return f"runs batched: on a batch of {batch_size}, its output gives each datapoint what it gives alone"
    if reason == ALIKE:
        return (f"runs per datapoint: its output could not be shown to be batch-first ({reason}); see {DOCS}. "
                "If its outputs have the batch first, declare batch_mode = 'batched'")
    return f"runs per datapoint: its output is not batch-first; see {DOCS}. On a batch of {batch_size}: {reason}"


def _attempt(batched: Callable[[], Any]) -> Any:
    """The batch output, or the ``BatchFailure`` of what computing it raised."""
    try:
        return batched()
    except Exception as exc:
        return BatchFailure(exc)


def _alone(alone: Callable[[int], Any], i: int) -> Any:
    try:
        return one_datapoint(alone(i))
    except Exception as exc:
        return DatapointFailure(exc, i)


def batched_verdict(together: Any, apart: list[Any], batch_size: int) -> Optional[str]:
    """None when the batch output ``together`` is proven to be each datapoint's: it holds no Python float (a number
    for the whole batch), it splits by the batch contract, each datapoint's part equals what that datapoint gave
    alone (``apart``, ``one_datapoint`` values) and the datapoints did not all give the same (then a value for the
    whole batch could not be told from theirs). Otherwise why not. ``UnsupportedOutputError``: a page cannot hold
    one of them."""
    if is_shared_record(together):
        return f"it gives one record for the whole batch ({together.get('message')})"
    where = python_float_at(together, "")
    if where is not None:
        return f"its batch output has a Python number at '{where or 'its output'}': one value for the whole batch"
    failed = next((value for value in apart if isinstance(value, DatapointFailure)), None)
    if failed is not None:
        return f"it runs on the whole batch but fails on datapoint {failed.position} alone ({failed.error})"
    try:
        rows = split_batch(together, batch_size)
    except BatchContractError as exc:
        return str(exc)
    alone = [to_page_value(value) for value in apart]
    for i, (row, value) in enumerate(zip(rows, alone)):
        difference = first_difference(row, value, "")
        if difference is not None:
            return f"datapoint {i}'s part of the batch output differs from what it gives alone: {difference}"
    if all(first_difference(alone[0], value, "") is None for value in alone[1:]):
        return ALIKE
    return None


def one_datapoint(value: Any) -> Any:
    """One datapoint's output computed alone (a batch of one): tensors and arrays of first dimension 1 lose it, as
    the batch split gives them; anything else (a (heads, L, L) mean, a 0-d tensor, numbers) is the datapoint's as
    it is."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return value[0] if value.ndim >= 1 and value.shape[0] == 1 else value
    if isinstance(value, PerDatapoint):
        return value[0] if len(value) == 1 else list(value)
    if isinstance(value, dict):
        return {key: one_datapoint(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(one_datapoint(item) for item in value) if type(value) in (list, tuple) else [
            one_datapoint(item) for item in value]
    return value


def python_float_at(value: Any, path: str) -> Optional[str]:
    """The path of the first Python/NumPy float scalar inside ``value`` (dicts, lists, tuples), or None."""
    if isinstance(value, (float, np.floating)):
        return path
    if isinstance(value, dict):
        children = [(f"{path}.{key}" if path else str(key), item) for key, item in value.items()]
    elif isinstance(value, (list, tuple)) and not isinstance(value, PerDatapoint):
        children = [(f"{path}[{i}]", item) for i, item in enumerate(value)]
    else:
        return None
    return next((found for child, item in children if (found := python_float_at(item, child)) is not None), None)


def first_difference(a: Any, b: Any, path: str) -> Optional[str]:
    """Where two page values differ, beyond float rounding (``RTOL``), said briefly; None when they agree."""
    at = f"at '{path}'" if path else "the output"
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.shape != b.shape:
            return f"{at} the batch gives {_brief(a)}, alone {_brief(b)}"
        if a.dtype.kind in "fc" or b.dtype.kind in "fc":
            finite = np.abs(b[np.isfinite(b)])
            scale = float(finite.max()) if finite.size else 1.0
            same = np.allclose(a, b, rtol=RTOL, atol=RTOL * scale, equal_nan=True)
        else:
            same = np.array_equal(a, b)
        return None if same else f"{at} the batch gives other values than alone ({_brief(a)})"
    if isinstance(a, float) or isinstance(b, float):
        same = isinstance(a, (int, float)) and isinstance(b, (int, float)) and (
            math.isclose(a, b, rel_tol=RTOL, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b)))
        return None if same else f"{at} the batch gives {_brief(a)}, alone {_brief(b)}"
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return f"{at} the batch gives keys {list(a)}, alone {list(b)}"
        return next((found for key in a if (found := first_difference(
            a[key], b[key], f"{path}.{key}" if path else str(key))) is not None), None)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and type(a) is type(b) and len(a) == len(b):
        return next((found for i, (x, y) in enumerate(zip(a, b))
                     if (found := first_difference(x, y, f"{path}[{i}]")) is not None), None)
    return None if type(a) is type(b) and a == b else f"{at} the batch gives {_brief(a)}, alone {_brief(b)}"


def _brief(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
