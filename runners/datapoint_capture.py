"""Capture what the viewer shows of each datapoint (inputs, labels, meta info) while the run evaluates it.

A run folder is data: the viewer and the export must never import the config
file it names to rebuild a dataset. So the runner records each datapoint once,
as the eval loop sees it: once per run for a trainer's validation set (at its
first validation; the validation set is the same every epoch), once for an
evaluation. Pages are written by the same background ``PageWriter`` as debug
outputs, in the same safe format, into ``<work dir>/datapoints/``.

Capture is bounded: an array over ``max_value_kb`` is downsampled (images by
area averaging, other arrays by striding) or, when it has no two dimensions to
shrink, replaced by a note; strings are cut; values a page cannot hold are kept
as their ``repr``; once ``max_total_mb`` are captured the rest of the datapoints
are not; a part a page cannot hold (a list of a million numbers in ``meta_info``)
becomes a note. A capture that fails (full disk, stalled writer) is logged and the run
goes on: the viewer then says the datapoint's inputs are unavailable. A writer that
makes no progress for ``stall_timeout_s`` (the debugger config's, else
``DEFAULT_STALL_TIMEOUT_S``) is ``stuck``: the runner then captures nothing more in
this run, rather than wait on the hung disk again at every epoch.

Config (optional): ``'datapoint_capture': {'max_value_kb': 256, 'max_total_mb': 256}``,
or ``'datapoint_capture': False`` to capture nothing.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F

from debuggers.pages.file_format import INDEX_GLOB
from debuggers.pages.index import read_index
from debuggers.pages.values import UnsupportedOutputError, to_page_value
from debuggers.pages.watchdog import DEFAULT_STALL_TIMEOUT_S
from debuggers.pages.writer import PageWriter
from run_dir.names import ITEM_KEYS
from utils.folder_glob import glob_in
from utils.ops import idx_list
from utils.settings import POSITIVE_NUMBER, Settings, setting

PAGE_SIZE_BYTES = 8 * 2**20
MAX_REPR_CHARS = 200


@dataclass(frozen=True)
class CaptureLimits(Settings):
    """``config['datapoint_capture']``, the datapoint capture hook's settings: how much of each datapoint, and of
    the whole run, is kept."""

    KEY = "datapoint_capture"
    DOC = ("each evaluated datapoint's inputs, labels and meta info captured once for the viewer, in `datapoints/`: "
           "`True` (default) or a dict of settings, `False` to capture nothing")
    IDENTIFIES_RUN = False  # it changes what is captured, not what is trained
    ON_BY_DEFAULT = True

    max_value_kb: float = setting(256, POSITIVE_NUMBER, "kilobytes kept of each array or string of a datapoint; a "
                                                        "bigger array is downsampled")
    max_total_mb: float = setting(256, POSITIVE_NUMBER, "megabytes captured in all; later datapoints are not")

    @property
    def max_value_bytes(self) -> int:
        return int(self.max_value_kb * 2**10)

    @property
    def max_total_bytes(self) -> int:
        return int(self.max_total_mb * 2**20)


class DatapointCapture:
    """Writes each datapoint's bounded ``{'inputs', 'labels', 'meta_info'}`` for one pass over a dataset."""

    def __init__(self, folder: str, limits: CaptureLimits, logger: logging.Logger, rank: int = 0,
                 world_size: int = 1, stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S) -> None:
        self.folder = folder
        self.limits = limits
        self._log = logger
        self._captured_bytes = 0
        self._failed = False
        self._full = False
        self._summary: dict[str, Any] = {}
        self._writer = PageWriter(PAGE_SIZE_BYTES, rank=rank, world_size=world_size,
                                  stall_timeout_s=stall_timeout_s)
        self._guard("start", lambda: self._writer.start_epoch(folder))

    def add_batch(self, batch: dict[str, Any]) -> None:
        """Record every datapoint of a collated batch (as the dataloader gives it, before any device copy)."""
        if self._failed or self._full:
            return
        idx = idx_list(batch["meta_info"]["idx"])
        shrunk = bounded({key: batch.get(key) for key in ITEM_KEYS}, self.limits.max_value_bytes, len(idx))
        row_bytes = _nbytes(shrunk) / len(idx)
        rows = []
        for row, i in enumerate(idx):
            self._captured_bytes += row_bytes
            if self._captured_bytes > self.limits.max_total_bytes:
                self._full = True
                self._log.info(f"Datapoint capture stops before datapoint {i}: the limit of "
                               f"{self.limits.max_total_bytes / 2**20:g} MB (config['datapoint_capture']"
                               "['max_total_mb']) is reached; the viewer says so for the other datapoints")
                break
            rows.append(_page_row(_row(shrunk, row, len(idx))))
        if rows:
            self._guard(f"datapoints {idx[0]}..{idx[len(rows) - 1]}",
                        partial(self._writer.add_converted, idx[:len(rows)], rows))

    def finish(self) -> Optional[tuple[int, int]]:
        """Write the last page and mark the capture complete, then stop the writer thread; return the datapoints
        and bytes this process captured (None where the capture failed)."""
        done = not self._failed and self._guard("finish", self._flush)
        self._writer.close()
        return (self._summary["datapoints"], self._summary["bytes"]) if done else None

    def _flush(self) -> None:
        self._summary = self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    @property
    def stuck(self) -> bool:
        """The writer made no progress for ``stall_timeout_s`` and has not since: the disk seems to hang."""
        return self._writer.stuck

    def _guard(self, what: str, action: Callable[[], Any]) -> bool:
        try:
            action()
            return True
        except Exception as exc:  # capturing inputs only helps the viewer: the run goes on without it
            self._failed = True
            later = " and captures nothing more in this run (it does not wait on this disk again)" if self.stuck \
                else ""
            self._log.warning(f"Datapoint capture in {self.folder} failed at {what} ({type(exc).__name__}: {exc}); "
                              f"the run goes on{later}, and the viewer says which inputs are unavailable")
            return False


def capture_is_complete(folder: str) -> bool:
    """True when every rank's index in ``folder`` says complete: the run already captured its datapoints."""
    paths = glob_in(folder, INDEX_GLOB)
    try:
        indexes = [read_index(path) for path in paths]
        return bool(indexes) and all(index["complete"] for index in indexes) \
            and {index["world_size"] for index in indexes} == {len(indexes)}
    except Exception:  # a damaged capture is simply captured again
        return False


# ------------------------------------------------------------------ values
def _page_row(item: dict[str, Any]) -> dict[str, Any]:
    """A datapoint's ``{'inputs', 'labels', 'meta_info'}`` as page values; a part a page cannot hold is a note."""
    row = {}
    for key, value in item.items():
        try:
            row[key] = to_page_value(value, key)
        except UnsupportedOutputError as exc:
            row[key] = f"<not captured: {exc}>"
    return row


def _row(value: Any, row: int, batch_size: int) -> Any:
    """Datapoint ``row`` of a collated value: tensors and lists with the batch first are split, others shared."""
    if isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim > 0 and value.shape[0] == batch_size:
        return value[row]
    if isinstance(value, dict):
        return {k: _row(v, row, batch_size) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and len(value) == batch_size:
        return value[row]
    return value


def bounded(value: Any, max_bytes: int, batch_size: int) -> Any:
    """A collated ``value`` whose arrays hold at most ``max_bytes`` per datapoint (downsampled) and whose
    strings are cut; page-safe leaves only. The whole batch is bounded at once (one pooling per batch)."""
    if isinstance(value, np.ndarray):
        value = torch.as_tensor(value) if value.dtype.kind in "biufc" else repr(value)[:MAX_REPR_CHARS]
    if isinstance(value, torch.Tensor):
        batched = value.ndim > 0 and value.shape[0] == batch_size
        return _bounded_array(value.detach().cpu(), max_bytes, batched)
    if isinstance(value, dict):
        return {k if isinstance(k, (str, int)) else str(k): bounded(v, max_bytes, batch_size)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [bounded(v, max_bytes, batch_size) for v in value]
    if isinstance(value, str):
        return value if len(value) <= max_bytes else value[:max_bytes] + "…"
    if isinstance(value, (bool, int, float, complex, type(None))):
        return value
    return repr(value)[:MAX_REPR_CHARS]


def _bounded_array(tensor: torch.Tensor, max_bytes: int, batched: bool) -> Any:
    """``tensor`` (rows first when ``batched``) with each row at most ``max_bytes``: as it is (the writer
    copies each row soon; the loader's batch is not reused), or downsampled over the last two dims."""
    rows = tensor.shape[0] if batched else 1
    row_bytes = tensor.numel() * tensor.element_size() // max(rows, 1)
    if row_bytes <= max_bytes:
        return tensor
    row_shape = tuple(tensor.shape[1:] if batched else tensor.shape)
    if len(row_shape) < 2:
        return _too_big(row_shape, tensor.dtype, row_bytes, max_bytes)
    factor = math.ceil(math.sqrt(row_bytes / max_bytes))
    if tensor.is_floating_point():
        height, width = tensor.shape[-2:]
        small = F.avg_pool2d(tensor.reshape(-1, 1, height, width).float(), factor, ceil_mode=True)
        small = small.reshape(*tensor.shape[:-2], *small.shape[-2:]).to(tensor.dtype)
    else:
        small = tensor[..., ::factor, ::factor].clone()
    if small.numel() * small.element_size() // max(rows, 1) > 2 * max_bytes:  # too many channels to shrink
        return _too_big(row_shape, tensor.dtype, row_bytes, max_bytes)
    return small


def _too_big(shape: tuple, dtype: torch.dtype, nbytes: int, max_bytes: int) -> str:
    return (f"<{shape} {dtype} of {nbytes} bytes: not captured, over the {max_bytes} bytes kept per value "
            "(config['datapoint_capture']['max_value_kb'])>")


def _nbytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, list):
        return sum(_nbytes(v) for v in value)
    return len(value) if isinstance(value, str) else 8
