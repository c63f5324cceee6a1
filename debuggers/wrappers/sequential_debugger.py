"""``SequentialDebugger``: run the configured debuggers on each batch and stream
their per-datapoint outputs to disk.

Lifecycle, driven by the runner::

    register_hooks(model)       at start-up: check every layer name exists
    reset_buffer(output_dir)    an epoch to capture starts; pages go to output_dir
    enabled = True              hooks are installed (none exist while disabled)
    __call__(datapoint, model)  each batch of the validation loop: {name: that debugger's output}
    save_all(output_dir)        last page and final index written
    enabled = False             hooks removed: training and testing see none
    close()                     background writer stopped

``enabled = True`` may also come first, as in the seed: the hooks go on once the model is known
(``register_hooks``, or the first ``__call__`` with a model).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from contextlib import AbstractContextManager
from typing import Any, Optional

import torch
import torch.distributed as dist

from debuggers.base_debugger import BaseDebugger, Removable
from debuggers.batch_mode import (
    PER_DATAPOINT,
    BatchFailure,
    DatapointFailure,
    Ran,
    batch_mode_check,
    calls_alone,
    declared_mode,
    python_float_at,
)
from debuggers.batch_split import BatchContractError, split_batch_value
from debuggers.datapoint_slices import datapoint_slice
from debuggers.forward_debugger import ForwardDebugger
from debuggers.outputs import PerDatapoint, error_output, is_shared_record, not_run_output
from debuggers.pages.encoding import MAX_HEADER_NODES
from debuggers.pages.file_format import INDEX_GLOB, LOCATIONS_GLOB, PAGE_GLOB
from debuggers.pages.host_copies import to_host
from debuggers.pages.keep_policy import build_capture_policy
from debuggers.pages.value_rules import UnsupportedOutputError
from debuggers.pages.values import to_page_value, value_nodes
from debuggers.pages.watchdog import DEFAULT_STALL_TIMEOUT_S, StallWatchdog
from debuggers.pages.writer import PageWriter
from debuggers.summaries import DebuggerSummaries
from debuggers.utils import UnknownLayerError, require_layer
from debuggers.wrappers.layer_sets import check_layer_set, expand_layer_set
from utils.builders import build_from_config
from utils.config_values import is_positive_number
from utils.errors import ConfigError
from utils.folder_glob import glob_in
from utils.ops import idx_list

logger = logging.getLogger("lantern.debugger")
WRITER_THREAD = "lantern-page-writer"  # the PageWriter's thread: its stack explains a stalled write
ENTRY_KEYS = {"name", "debugger_config", "keep", "layers"}
ERROR_RECORD_NODES = 32  # header values of an error record, at most


class DebuggerError(RuntimeError):
    """A debugger failed in ``strict`` mode."""


class SequentialDebugger(BaseDebugger):
    """Runs several named debuggers and writes their outputs in bounded pages.

    Args:
        debuggers_config: ``[{'name': str, 'debugger_config': {'class': ..., 'args': {...}}}, ...]``; an entry
            with ``'layers': {'type': ..., 'name': ...}`` is a debugger on every module of a type or name pattern
            (``debuggers/wrappers/layer_sets.py``), made once the model is known.
        page_size_mb: a page is written once its outputs reach this many megabytes.
        model: register hooks on this model at once (the runners call ``register_hooks``).
        strict: raise when a debugger fails, instead of recording its error and going on.
        stall_timeout_s: a debugger call, a forward pass with hooks, or a page write that makes no progress
            for this long is stuck (``debuggers/pages/watchdog.py``): it is logged with its stack after a quarter
            of it; then a debugger call ends the run with ``DebuggerStallError`` (resumable), a page write
            stops capture for the epoch.
        keep: whose full outputs are written, for every debugger without its own ``'keep'`` entry: 'all',
            'failing', a score threshold or the worst k (``debuggers/pages/keep_policy.py``). Summaries are kept
            for every datapoint whatever it says.
        summaries_every_epoch: the trainer also runs the debuggers at the validation epochs that are not
            checkpoint epochs, keeping only their summaries (the epoch table's columns).
        direct_io: big captures (an ``AttentionDebugger``'s weights) go to the disk with O_DIRECT, without a
            copy into the page cache, where the disk takes them fast; False: everything through the page cache.
    """

    UNBUILT_ARGS = ("debuggers_config",)  # built here (utils/builders.py): a 'layers' entry needs the model

    def __init__(self, debuggers_config: list[dict[str, Any]], page_size_mb: float = 100,
                 model: Optional[torch.nn.Module] = None, strict: bool = False,
                 stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S, keep: Any = "all",
                 summaries_every_epoch: bool = False, direct_io: bool = True) -> None:
        self.page_size = _page_size_bytes(page_size_mb)
        self.strict = strict
        self._config, self._keep, self._log = debuggers_config, keep, logger
        self._use(*_build_debuggers(debuggers_config)[:2])
        for name, flag in (("summaries_every_epoch", summaries_every_epoch), ("direct_io", direct_io)):
            if not isinstance(flag, bool):
                raise ConfigError(f"{name} must be True or False, got {flag!r}")
        self.summaries_every_epoch = summaries_every_epoch
        self.full_outputs = True
        rank, world_size = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
        self._writer = PageWriter(self.page_size, rank=rank, world_size=world_size,
                                  stall_timeout_s=_stall_timeout(stall_timeout_s), direct_io=direct_io)
        self._model: Optional[torch.nn.Module] = None
        self._handles: list[Removable] = []
        self._enabled = False
        self._staging_dir: Optional[str] = None
        self._failed: set[str] = set()
        self._checked_numbers: set[str] = set()
        self._epoch_open = False
        self.write_error: Optional[BaseException] = None
        self._watchdog = StallWatchdog(self._writer.stall_timeout_s, logger)
        self.output_dir: Optional[str] = None  # where this epoch's pages go (the seed's attribute)
        if model is not None:
            self.register_hooks(model)

    # ------------------------------------------------------------- hooks
    def register_hooks(self, model: torch.nn.Module, logger: Optional[logging.Logger] = None) -> None:
        """Remember ``model``; an unknown layer name raises here, with the closest names.

        Failures reported later go to ``logger`` (the run's) instead of ``lantern.debugger``, so they reach
        the run's log file. Entries with ``'layers'`` become one debugger per matching module here.
        """
        debuggers, keeps, notes = _build_debuggers(self._config, model, self.debuggers)
        for name, debugger in debuggers.items():
            for layer_name in debugger.layer_names():
                try:
                    require_layer(model, layer_name)
                except UnknownLayerError as exc:
                    raise UnknownLayerError(f"debugger '{name}': {exc}") from None
        if logger is not None:
            self._log = self._watchdog.logger = logger
        was_enabled = self.enabled
        self.enabled = False
        if notes:
            self._use(debuggers, keeps)
        for note in notes:
            self._log.info(note)
        if logger is not None:
            for layer_name, on_layer in self.forward_debuggers.items():
                logger.info(f"{len(on_layer)} forward debugger(s) on layer '{layer_name}'")
        self.summaries.log = self._log
        self._model = model
        self.enabled = was_enabled

    def _use(self, debuggers: dict[str, BaseDebugger], keeps: dict[str, Any]) -> None:
        """Run these debuggers (``keeps``: each one's own capture policy, None for the default)."""
        self.debuggers = debuggers
        self.capture_policy = build_capture_policy(self._keep, keeps)
        self.forward_debuggers: dict[str, list[ForwardDebugger]] = {}
        for debugger in debuggers.values():
            if isinstance(debugger, ForwardDebugger):
                self.forward_debuggers.setdefault(debugger.layer_name, []).append(debugger)
        self.summaries = DebuggerSummaries(debuggers, self._log)

    @property
    def stall_timeout_s(self) -> float:
        """Seconds without progress after which a debugger call or a page write counts as stuck."""
        return self._writer.stall_timeout_s

    @property
    def enabled(self) -> bool:
        return self._enabled

    @enabled.setter
    def enabled(self, value: bool) -> None:
        """Enabling installs every hook (once the model is known: ``register_hooks``); disabling removes them all."""
        value = bool(value)
        if value == self._enabled:
            return
        self._enabled = value
        if value:
            self._attach()
        else:
            self._detach()
            for debugger in self.debuggers.values():  # the epoch is over
                debugger.release()

    def _attach(self) -> None:
        if self._model is None:
            return
        for debugger in self.debuggers.values():
            self._handles.extend(debugger.attach(self._model))

    def _detach(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        for debugger in self.debuggers.values():
            debugger.clear()

    # ---------------------------------------------------------- capture
    def __call__(self, datapoint: dict[str, Any], model: Optional[torch.nn.Module] = None,
                 idx: Any = None) -> dict[str, Any]:
        """Run every debugger on this batch and hand each datapoint's outputs to the pages; return ``{name: that
        debugger's own return value}`` for the batch, as the seed does (None where it did not run, its error
        record where it raised)."""
        if not self.enabled or not self.debuggers:
            return {}
        if self._model is None and model is not None:  # enabled before the model was known
            self.register_hooks(model)
        model = self._model if model is None else model
        idx = idx_list(datapoint["meta_info"]["idx"] if idx is None else idx)
        runs = {name: self._run(name, d, datapoint, model, len(idx)) for name, d in self.debuggers.items()
                if not d.runs_model}
        active = {name: d for name, d in self.debuggers.items() if d.runs_model}
        if active:
            self._detach()
            runs.update({name: self._run(name, d, datapoint, model, len(idx)) for name, d in active.items()})
            self._attach()
        else:
            for debugger in self.debuggers.values():
                debugger.clear()
        pages = {name: self._datapoint_records(name, runs[name].pages, idx) for name in self.debuggers}
        self._log_batch_modes()
        if len(idx) > 1:
            self._warn_whole_batch_numbers(pages)
        computed = {name: run.columns for name, run in runs.items() if run.columns is not None}
        self._buffer_batch(idx, pages, computed, datapoint.get("scores"))
        return {name: runs[name].returned for name in self.debuggers}

    def watch_forward(self) -> AbstractContextManager:
        """Wrap the model's forward pass while enabled: the forward debuggers' hooks run in there."""
        names = [name for name, d in self.debuggers.items() if isinstance(d, ForwardDebugger)]
        return self._watchdog.watch(f"the model's forward pass with the hooks of forward debuggers {names}",
                                    interrupt=True)

    def _run(self, name: str, debugger: BaseDebugger, datapoint: dict, model: torch.nn.Module,
             batch_size: int) -> Ran:
        """What the debugger returns for the batch and what its pages get (``Ran``): a not-run record where it
        did not run, its error record where it raised."""
        with self._watchdog.watch(f"debugger '{name}' (its call on a batch)", interrupt=True):
            try:
                ran = _call(debugger, datapoint, model, batch_size)
            except Exception as exc:
                record = self._record_failure(name, exc)
                return Ran(record, record)
        if isinstance(ran.returned, BatchFailure):  # its pages hold what each datapoint gave alone
            return Ran(error_output(ran.returned.error), ran.pages)
        if ran.pages is None:
            reason = debugger.not_run_reason(model)
            if reason is not None:
                return Ran(None, not_run_output(reason))
        return ran

    def _record_failure(self, name: str, exc: Exception, datapoint: Optional[int] = None, hint: str = "") -> dict:
        """The error record of a debugger that raised on the batch, or on ``datapoint`` alone (``hint``: what to
        do)."""
        where = "" if datapoint is None else f" on datapoint {datapoint}"
        if self.strict:
            raise DebuggerError(f"debugger '{name}' failed{where}: {type(exc).__name__}: {exc}") from exc
        if name not in self._failed:
            self._failed.add(name)
            self._log.warning(f"debugger '{name}' failed{where} ({type(exc).__name__}: {exc}); its error is "
                              "recorded as its output and the run goes on (set strict=True to stop instead)",
                              exc_info=exc)
        record = error_output(exc)
        if datapoint is not None:
            record["message"] = f"on datapoint {datapoint} alone: {record['message']}" + (f" ({hint})" if hint else "")
        return record

    def _datapoint_records(self, name: str, output: Any, idx: list[int]) -> Any:
        """A per-datapoint output with each datapoint's failure as its own error record, naming the datapoint."""
        if not isinstance(output, PerDatapoint) or not any(isinstance(v, DatapointFailure) for v in output):
            return output
        return type(output)(self._record_failure(name, v.error, idx[v.position], v.hint)
                            if isinstance(v, DatapointFailure) else v for v in output)

    def _log_batch_modes(self) -> None:
        """Once per debugger and run: whether it was found to run batched or per datapoint, and why."""
        for name, debugger in self.debuggers.items():
            check = batch_mode_check(debugger)
            news = check.take_news()
            if news is not None:
                log = self._log.warning if check.mode == PER_DATAPOINT else self._log.info
                log(f"debugger '{name}' {news}. Declaring batch_mode = '{check.mode}' on {type(debugger).__name__} "
                    "skips this check")

    def _warn_whole_batch_numbers(self, outputs: dict[str, Any]) -> None:
        """Once per debugger: a Python float is one value for the whole batch, stored for each datapoint."""
        for name, output in outputs.items():
            if name in self._checked_numbers or is_shared_record(output):
                continue
            self._checked_numbers.add(name)
            where = python_float_at(output, "")
            if where is not None:
                self._log.warning(
                    f"debugger '{name}' returned a Python number at '{where or 'its output'}' (from .item() or "
                    "float()?): it is one value for the whole batch, stored unchanged for every datapoint of the "
                    "batch. Return a tensor with the batch first for a value per datapoint, e.g. "
                    "output.mean(dim=(1, 2, 3)) instead of float(output.mean()); a value meant for the whole "
                    "batch can stay as it is (this is said once per debugger)")

    def _buffer_batch(self, idx: list[int], pages: dict[str, Any], computed: dict[str, Any],
                      scores: Optional[dict] = None) -> None:
        """Compute the summaries of the batch (``computed``: those computed already), split each debugger's output
        into its datapoints' (GPU tensors copied to the host first, one wait for the batch, summaries included;
        one conversion per batch), and queue one dict per datapoint that the capture policy keeps (``scores``:
        the metric's, for the policy). Without full outputs only what the summaries read is copied and split.

        A debugger whose output breaks the batch contract or cannot be stored gets an error record;
        the other debuggers' outputs are kept.
        """
        columns = self.summaries.batch_columns(pages, computed)
        if not self.full_outputs:
            pages = {name: output for name, output in pages.items() if self.summaries.needs_rows(name, columns)}
        pages, columns = to_host((pages, columns))
        split = {name: self._split(name, output, len(idx)) for name, output in pages.items()}
        for name, exc in _refused_for_the_header({name: batch_value for name, (_, batch_value) in split.items()}):
            split[name] = split_batch_value(self._record_failure(name, exc), len(idx))
        per_name = {name: rows for name, (rows, _) in split.items()}
        self.summaries.add_batch(idx, per_name, columns)
        if self.full_outputs:
            batch_values = {name: batch_value for name, (_, batch_value) in split.items()}
            self._queue(*self.capture_policy.select(idx, per_name, scores, batch_values))

    def _queue(self, idx: list[int], values: list[dict[str, Any]], batch_value: Any = None) -> None:
        if self.write_error is not None or not idx:
            return
        try:
            with self._watch_writer(f"queueing datapoints {idx[0]}..{idx[-1]}"):
                self._writer.add_converted(idx, values, batch_value)
        except Exception as exc:
            self._write_failed(exc)

    def _split(self, name: str, output: Any, batch_size: int) -> tuple[list[Any], Any]:
        """The output's page value per datapoint, and as one batch value (``split_batch_value``)."""
        try:
            return split_batch_value(output, batch_size, name)
        except (BatchContractError, UnsupportedOutputError) as exc:
            return split_batch_value(self._record_failure(name, exc), batch_size)

    def add_to_buffer(self, datapoint_idx: int, debug_outputs: dict[str, Any]) -> None:
        """Hand one datapoint's outputs to the page writer (waits if the disk lags behind).

        An output that a page cannot hold becomes that debugger's error record.
        """
        if self.write_error is not None:
            return
        if isinstance(debug_outputs, dict):
            debug_outputs = {name: self._page_value(name, output) for name, output in debug_outputs.items()}
            for name, exc in _refused_for_the_header(debug_outputs):
                debug_outputs[name] = to_page_value(self._record_failure(name, exc))
        try:
            with self._watch_writer(f"queueing datapoint {datapoint_idx}"):
                self._writer.add(int(datapoint_idx), debug_outputs)
        except Exception as exc:
            self._write_failed(exc)

    def _page_value(self, name: str, output: Any) -> Any:
        try:
            return to_page_value(output, name)
        except UnsupportedOutputError as exc:
            return to_page_value(self._record_failure(name, exc))

    def _watch_writer(self, phase: str) -> AbstractContextManager:
        return self._watchdog.watch(f"the page writer of {self.output_dir} ({phase})", interrupt=False,
                                    extra_threads=(WRITER_THREAD,))

    def _write_failed(self, exc: Exception) -> None:
        """Stop capture for this epoch (or raise, when strict): training must go on without it."""
        if self.strict:
            raise exc
        self.write_error = exc
        self._log.error(f"debug outputs of {self.output_dir} cannot be written ({exc}); capture stops for this "
                        "epoch, training goes on")

    # ----------------------------------------------------------- pages
    def reset_buffer(self, output_dir: Optional[str] = None, full_outputs: bool = True) -> None:
        """Start an epoch: pages go to ``output_dir`` (or a staging folder until ``save_all``).

        ``full_outputs=False``: only the summaries are collected, no page is written (``output_dir`` unused).
        """
        self.write_error = None
        try:
            self._writer.end_epoch()  # before the last staging folder goes: nothing is written there afterwards
        except Exception as exc:
            self._write_failed(exc)
        self._discard_staging()
        self._failed = set()
        self.summaries.reset()
        self.capture_policy.start_epoch()
        self.full_outputs = full_outputs
        self._epoch_open = False
        if not full_outputs:
            return
        if output_dir is None:
            self._staging_dir = tempfile.mkdtemp(prefix="lantern-debug-")
        self.output_dir = output_dir or self._staging_dir
        try:
            self._writer.start_epoch(output_dir or self._staging_dir)
            self._epoch_open = True
        except Exception as exc:
            self._write_failed(exc)

    def save_all(self, output_dir: Optional[str] = None) -> dict[str, Any]:
        """Write what is left and the final index; returns ``{'pages', 'datapoints', 'bytes'}``."""
        summary = {"pages": 0, "datapoints": 0, "bytes": 0}
        if self.full_outputs:
            self._queue(*self.capture_policy.finish())  # the epoch's worst k, known only now
        if self._epoch_open:
            try:
                with self._watch_writer("writing the last page"):
                    summary = self._writer.flush()
            except Exception as exc:
                if self.strict:
                    raise
                self.write_error = self.write_error or exc
        if self._staging_dir is not None:
            if output_dir is None:
                raise ValueError("save_all needs output_dir: reset_buffer() was called without one")
            _move_pages(self._staging_dir, output_dir)
            self._discard_staging()
            self.output_dir = output_dir
        if self.write_error is not None:
            summary["error"] = str(self.write_error)
        return summary

    def close(self) -> None:
        """Remove all hooks and stop the writer thread."""
        self.enabled = False
        self._writer.close()
        self._watchdog.close()
        self._discard_staging()

    def _discard_staging(self) -> None:
        if self._staging_dir is not None:
            shutil.rmtree(self._staging_dir, ignore_errors=True)
            self._staging_dir = None


def _call(debugger: BaseDebugger, datapoint: dict, model: torch.nn.Module, batch_size: int) -> Ran:
    """The debugger's output for the batch, and what its pages get: the same where it is batch-first; where it runs
    per datapoint (``debuggers/batch_mode.py``; a ``ForwardDebugger`` does that in its hook), what each datapoint
    gave alone."""
    if isinstance(debugger, ForwardDebugger) and debugger.datapoint_captures is not None:
        captures = debugger.datapoint_captures
        if len(captures) != batch_size:
            raise BatchContractError(
                f"layer '{debugger.layer_name}' gave {len(captures)} datapoint(s) along its batch dimension but the "
                f"batch has {batch_size}, so it cannot be run per datapoint; declare batch_mode = 'batched' on the "
                "class if process_forward returns batch-first outputs")
        try:
            return Ran(debugger(datapoint, model), captures)
        except Exception as exc:
            return Ran(BatchFailure(exc), captures)
    if isinstance(debugger, ForwardDebugger):
        output = debugger(datapoint, model)
        return Ran(output, output, debugger.captured_columns)
    if not calls_alone(debugger):
        output = debugger(datapoint, model)
        return Ran(output, output)
    return batch_mode_check(debugger).run(lambda: debugger(datapoint, model),
                                          lambda i: debugger(datapoint_slice(datapoint, i, batch_size), model),
                                          batch_size)


def _refused_for_the_header(parts: dict[str, Any]) -> list[tuple[str, UnsupportedOutputError]]:
    """The outputs, biggest first, that one datapoint's record of ``parts`` ({debugger name: page value, or batch
    value: a datapoint's part of it}) goes without to fit a page's header bound (``MAX_HEADER_NODES``, which the
    encoder and the reader enforce on the whole record), each with why. Each output is bounded on its own as it is
    converted; together they may still pass the record's bound, and the record would then be refused whole."""
    sizes = {name: value_nodes(part, MAX_HEADER_NODES) for name, part in parts.items()}
    total = 2 + sum(3 + size for size in sizes.values())  # as value_nodes counts the record's dict
    refused: list[tuple[str, UnsupportedOutputError]] = []
    for name in sorted(sizes, key=sizes.__getitem__, reverse=True):
        if total + ERROR_RECORD_NODES * len(refused) <= MAX_HEADER_NODES:
            break
        refused.append((name, UnsupportedOutputError(
            f"this datapoint's outputs hold {total} numbers, strings and items of Python lists, tuples and dicts "
            f"together, over the {MAX_HEADER_NODES} a page's record may list; '{name}' holds {sizes[name]} of them "
            "and is left out: return it as an array or tensor instead (e.g. np.asarray(values) or "
            "torch.tensor(values)), or return less")))
        total -= sizes[name]
    return refused


def _page_size_bytes(page_size_mb: Any) -> int:
    if not is_positive_number(page_size_mb):
        raise ConfigError(f"page_size_mb must be a positive number of megabytes (e.g. 100), got {page_size_mb!r}")
    return max(1, int(page_size_mb * 1024 * 1024))


def _stall_timeout(value: Any) -> float:
    if not is_positive_number(value):
        raise ConfigError(f"stall_timeout_s must be a positive number of seconds (how long a debugger call or a "
                          f"page write may make no progress before it counts as stuck), got {value!r}")
    return float(value)


def _build_debuggers(debuggers_config: Any, model: Optional[torch.nn.Module] = None,
                     built: Optional[dict[str, BaseDebugger]] = None,
                     ) -> tuple[dict[str, BaseDebugger], dict[str, Any], list[str]]:
    """The named debuggers, each one's own ``keep``, and a line to log per ``'layers'`` entry. Entries with
    ``'layers'`` are checked, and made only with ``model``; ``built``: debuggers already made, kept as they are.
    An empty list (every entry commented out) is a debugger that does nothing."""
    if not isinstance(debuggers_config, (list, tuple)):
        raise ConfigError("debuggers_config must be a list of {'name': ..., 'debugger_config': ...} "
                          f"(an empty list switches them all off), got {type(debuggers_config).__name__}")
    entries, notes = [], []
    for i, entry in enumerate(debuggers_config):
        where = f"debuggers_config[{i}]"
        if not isinstance(entry, dict) or not {"name", "debugger_config"} <= set(entry) <= ENTRY_KEYS:
            raise ConfigError(f"{where} must be a dict with exactly 'name' and 'debugger_config' (and optionally "
                              f"'keep', its capture policy, and 'layers', the modules it hooks), got {entry!r}")
        name = entry["name"]
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}['name'] must be a non-empty string, got {name!r}")
        where = f"{where} ('{name}')"
        if "layers" not in entry:
            entries.append((where, entry))
        elif model is None:
            check_layer_set(entry, where)
        else:
            expanded, note = expand_layer_set(entry, model, where)
            entries += [(where, one) for one in expanded]
            notes.append(note)
    debuggers: dict[str, BaseDebugger] = {}
    for where, entry in entries:
        name = entry["name"]
        if name in debuggers:
            raise ConfigError(f"{where}: duplicate debugger name '{name}'; every debugger needs its own name, "
                              "it is the key of its outputs")
        debugger = (built or {}).get(name)
        if debugger is None:
            debugger = build_from_config(entry["debugger_config"], f"{where}['debugger_config']")
        if not isinstance(debugger, BaseDebugger):
            raise ConfigError(f"{where} built a {type(debugger).__name__}, which is not a BaseDebugger; "
                              "subclass debuggers.base_debugger.BaseDebugger or ForwardDebugger")
        declared_mode(debugger)  # a misspelt batch_mode stops the run here
        debuggers[name] = debugger
    return debuggers, {entry["name"]: entry.get("keep") for _, entry in entries}, notes


def _move_pages(source: str, output_dir: str) -> None:
    os.makedirs(output_dir, exist_ok=True)
    for pattern in (PAGE_GLOB, LOCATIONS_GLOB, INDEX_GLOB):  # the index last: it never lists what is not there
        for path in glob_in(source, pattern):
            shutil.move(path, os.path.join(output_dir, os.path.basename(path)))
