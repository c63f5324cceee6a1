"""``PageWriter``: streams per-datapoint debug outputs to size-bounded pages from a background thread.

The eval loop calls ``add`` once per datapoint: the outputs are converted there
(``to_page_value``: a conversion error belongs to that call alone) and queued; a
daemon thread appends each batch's records to the open page file as it comes
(``PageFile``: a batch of one structure is encoded at once; batches queued behind
one being written are written together, in one system call), seals the page once
it reaches ``page_size_bytes``, appends its rows to the locations file and
rewrites the index. No page is held in memory:
the writer holds at most ``max_in_flight_bytes`` of queued outputs, counted as
the memory they really keep alive (``held_storage``: the rows of one batch array
count that array once; a small view of a large storage counts the storage), so
memory stays bounded whatever the page size and the epoch's size.

Nothing hangs: every wait wakes every ``_POLL_S`` seconds to check that the worker
is alive and has not failed, and gives up with ``TimeoutError`` after
``stall_timeout_s`` without progress. The writer is then ``stuck`` until its worker
moves again: later waits, and ``start_epoch``, give up at once instead of waiting
``stall_timeout_s`` again on a disk known to hang, and ``close`` does not wait for
the worker. A failure in the worker is kept in
``error``; the worker then discards what is queued (so callers never block) and the
next ``add`` or ``flush`` raises ``WriterThreadError`` chaining it.
"""

from __future__ import annotations

import contextlib
import operator
import os
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from debuggers.pages.batch_values import DatapointValues, take_rows
from debuggers.pages.encoding import MAX_HEADER_NODES
from debuggers.pages.errors import PageWriteError
from debuggers.pages.file_format import PageFile, index_file_name, is_own_file, locations_file_name, page_file_name
from debuggers.pages.index import INDEX_VERSION, LocationsFile, sort_locations, write_index
from debuggers.pages.value_rules import UnsupportedOutputError
from debuggers.pages.values import held_storage, to_page_value

_POLL_S = 0.5
_JOIN_TIMEOUT_S = 10.0
DEFAULT_IN_FLIGHT_BYTES = 16 * 1024 * 1024
_GROUP_ITEMS = 16  # queued batches written together at most


class WriterThreadError(RuntimeError):
    """The background page writer failed; the original error is chained as ``__cause__``."""


@dataclass
class _Epoch:
    """One epoch's folder and bookkeeping; the page fields are touched by the worker only."""

    output_dir: str
    index_path: str
    locations: LocationsFile
    seen: set[int] = field(default_factory=set)
    flushed: bool = False
    error: BaseException | None = None
    error_context: str = ""
    error_reported: bool = False
    page: PageFile | None = None  # the page being appended to
    pages: int = 0  # sealed pages
    datapoints: int = 0  # rows in the locations file
    sorted: bool = True  # rows in increasing idx order so far
    last_idx: int | None = None
    disk_bytes: int = 0


@dataclass
class _Item:
    """Datapoints queued together (a batch): their page values and the memory blocks they keep alive."""

    epoch: _Epoch
    indices: list[int]
    values: Sequence[Any] | None  # page values (to_page_value, DatapointValues); None once written
    owners: list[int]  # ids of the memory blocks they keep alive, in PageWriter._held
    batch_value: Any = None  # the same in column form (debuggers.pages.batch_values), or None


@dataclass
class _Finish:
    """Write the partial page and the index; ``done`` is set by the worker."""

    epoch: _Epoch
    complete: bool
    done: bool = False


def _positive(name: str, value: Any, kind: type | tuple[type, ...]) -> None:
    if isinstance(value, bool) or not isinstance(value, kind) or value <= 0:
        noun = "integer (bytes)" if kind is int else "number"
        raise ValueError(f"PageWriter: {name} must be a positive {noun}, got {value!r}")


class PageWriter:
    """Writes ``{idx: outputs}`` pages of about ``page_size_bytes`` into one folder per epoch.

    Args:
        page_size_bytes: a page is sealed once it reaches this many bytes.
        max_in_flight_bytes: memory held by queued outputs before ``add`` waits
            (default: one page, at most ``DEFAULT_IN_FLIGHT_BYTES``).
        rank, world_size: name pages and index per rank so ranks can share a folder.
        stall_timeout_s: give up waiting after this long without any progress of the writer.
        direct_io: write big arrays in buffers of their own with O_DIRECT, where the disk takes them fast
            (``debuggers.pages.file_format``); False: everything through the page cache.
    """

    def __init__(self, page_size_bytes: int, max_in_flight_bytes: int | None = None, rank: int = 0,
                 world_size: int = 1, stall_timeout_s: float = 300.0, direct_io: bool = True) -> None:
        _positive("page_size_bytes", page_size_bytes, int)
        if max_in_flight_bytes is None:
            max_in_flight_bytes = min(page_size_bytes, DEFAULT_IN_FLIGHT_BYTES)
        _positive("max_in_flight_bytes", max_in_flight_bytes, int)
        _positive("stall_timeout_s", stall_timeout_s, (int, float))
        if not (isinstance(rank, int) and isinstance(world_size, int) and 0 <= rank < world_size):
            raise ValueError(f"PageWriter: need 0 <= rank < world_size, got rank={rank!r}, world_size={world_size!r}")
        self.page_size_bytes = page_size_bytes
        self.max_in_flight_bytes = max_in_flight_bytes
        self.rank, self.world_size = rank, world_size
        self.stall_timeout_s = float(stall_timeout_s)
        self.direct_io = bool(direct_io)
        self.peak_in_flight_bytes = 0
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[_Item | _Finish] = deque()
        self._in_flight = 0
        self._held: dict[int, list] = {}  # id(owner) -> [owner, nbytes, queued items holding it]
        self._progress = 0  # bumped by the worker on every step; waits use it to detect a stall
        self._stuck_at: int | None = None  # ``_progress`` when a wait last gave up on the worker
        self._epoch: _Epoch | None = None
        self._thread: threading.Thread | None = None
        self._fatal: BaseException | None = None
        self._closed = False

    # ---------------------------------------------------------------- API
    @property
    def error(self) -> BaseException | None:
        """The worker's first failure in this epoch (or what stopped the thread)."""
        return self._fatal or (self._epoch.error if self._epoch else None)

    @property
    def in_flight_bytes(self) -> int:
        return self._in_flight

    @property
    def stuck(self) -> bool:
        """A wait gave up on the worker after ``stall_timeout_s``, and it has made no progress since."""
        return self._stuck_at == self._progress and self._thread is not None and self._thread.is_alive()

    def start_epoch(self, output_dir: str) -> None:
        """Open ``output_dir`` for a new epoch, deleting this rank's leftovers of a crashed attempt."""
        self._check_open("start_epoch()")
        if self.stuck:
            raise WriterThreadError(f"the debug page writer is still stuck writing {self._epoch.output_dir} (no "
                                  f"progress for {self.stall_timeout_s:g} s or more: the disk seems to hang), so "
                                  f"nothing is written to {output_dir}. Check the disk, or raise stall_timeout_s")
        self._close_previous_epoch()
        try:
            self._clear_folder(output_dir)
            epoch = _Epoch(output_dir, os.path.join(output_dir, index_file_name(self.rank, self.world_size)),
                           LocationsFile(os.path.join(output_dir, locations_file_name(self.rank, self.world_size))))
            write_index(epoch.index_path, self._index(epoch, complete=False))
        except (OSError, PageWriteError) as exc:
            raise WriterThreadError(f"cannot prepare the debug page folder {output_dir}: {exc}. Check that the "
                                  "path is a writable folder (not a file) with free space.") from exc
        with self._cond:
            self._epoch = epoch
        self._ensure_thread()

    def end_epoch(self) -> None:
        """Let go of the open epoch before its folder is removed (a staging folder): what it left is written there
        first, as ``start_epoch`` would (its index incomplete unless flushed), and nothing after. A stuck writer
        keeps it: ``start_epoch`` says so."""
        if self.stuck:
            return
        self._close_previous_epoch()
        with self._cond:
            self._epoch = None

    def add(self, idx: int, outputs: dict) -> None:
        """Convert and queue one datapoint's outputs; waits while the in-flight budget is used up.

        Raises ``UnsupportedOutputError`` (naming idx and the path inside the outputs) for
        something a page cannot hold; the epoch goes on.
        """
        idx = _as_idx(idx)
        if not isinstance(outputs, dict):
            raise TypeError(f"outputs of datapoint idx={idx} must be a dict {{debugger_name: output}}, "
                            f"got a {type(outputs).__name__}")
        try:
            value = to_page_value(outputs, max_nodes=MAX_HEADER_NODES)  # a whole record, not one output
        except UnsupportedOutputError as exc:
            raise UnsupportedOutputError(f"datapoint idx={idx}: {exc}") from None
        self.add_converted([idx], [value])

    def add_converted(self, indices: list[int], values: Sequence[dict], batch_value: Any = None) -> None:
        """Queue datapoints whose outputs are page values already (``to_page_value``, ``split_batch``).

        A whole batch goes in one step: one lock round and one wake-up of the writer. ``batch_value``, when
        given, is the same outputs in column form (``debuggers.pages.batch_values``): the batch is then encoded and
        its memory counted from it, without a walk of each datapoint's outputs.
        """
        epoch = self._open_epoch("add()")
        self._raise_if_failed(epoch, "accept more outputs")
        indices = _as_indices(indices)
        batch = set(indices)
        if len(batch) < len(indices) or not epoch.seen.isdisjoint(batch):
            raise ValueError(f"datapoint idx={_repeated(indices, epoch.seen)} was added twice in this epoch: "
                             "meta_info['idx'] must be unique per datapoint (check the dataset's meta_info and the "
                             "sampler)")
        traced: dict[int, tuple[Any, int]] = {}
        owners = {id(owner): (owner, nbytes) for value in ([batch_value] if batch_value is not None else values)
                  for owner, nbytes in held_storage(value, traced)}
        with self._cond:
            self._wait_for(lambda: self._in_flight == 0 or self._in_flight + self._new_bytes(owners)
                           <= self.max_in_flight_bytes, epoch, f"queue datapoint idx={indices[0]}")
            self._hold(owners)
            self._queue.append(_Item(epoch, indices, values if type(values) is DatapointValues else list(values),
                                     list(owners), batch_value))
            self.peak_in_flight_bytes = max(self.peak_in_flight_bytes, self._in_flight)
            self._cond.notify_all()
        epoch.seen |= batch

    def flush(self) -> dict:
        """Wait until everything added is on disk and the index says ``'complete': true``."""
        epoch = self._open_epoch("flush()", allow_flushed=True)
        if not epoch.flushed:
            self._raise_if_failed(epoch, "flush")
            self._finish(epoch, complete=True, raise_errors=True)
            epoch.flushed = True
        return {"pages": epoch.pages, "datapoints": epoch.datapoints, "bytes": epoch.disk_bytes}

    def close(self) -> None:
        """Stop the thread; outputs not yet flushed are dropped (the page being written is removed). Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()
        if self._thread is not None and not self.stuck:
            self._thread.join(_JOIN_TIMEOUT_S)

    def __enter__(self) -> PageWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------- caller side
    def _clear_folder(self, output_dir: str) -> None:
        """Create ``output_dir``, or remove this rank's files from it (a crashed attempt's)."""
        try:
            os.mkdir(output_dir)
            return  # a new folder holds nothing to remove
        except FileNotFoundError:
            os.makedirs(output_dir, exist_ok=True)
        except FileExistsError:
            pass
        for name in os.listdir(output_dir):
            if is_own_file(name, self.rank, self.world_size):
                os.remove(os.path.join(output_dir, name))

    def _new_bytes(self, owners: dict[int, tuple[Any, int]]) -> int:
        """Bytes that queueing these owners adds: memory already held by a queued item counts once."""
        return sum(nbytes for key, (_, nbytes) in owners.items() if key not in self._held)

    def _hold(self, owners: dict[int, tuple[Any, int]]) -> None:
        for key, (owner, nbytes) in owners.items():
            entry = self._held.get(key)
            if entry is None:
                self._held[key] = entry = [owner, nbytes, 0]
                self._in_flight += nbytes
            entry[2] += 1

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise RuntimeError(f"PageWriter.{what} after close(): this writer is stopped; create a new one")

    def _open_epoch(self, what: str, allow_flushed: bool = False) -> _Epoch:
        self._check_open(what)
        epoch = self._epoch
        if epoch is None:
            raise RuntimeError(f"PageWriter.{what} before start_epoch(output_dir): start an epoch first")
        if epoch.flushed and not allow_flushed:
            raise RuntimeError(f"PageWriter.{what} after flush(): this epoch is complete on disk; "
                               "call start_epoch(output_dir) for the next one")
        return epoch

    def _close_previous_epoch(self) -> None:
        """Write what an unflushed epoch left (index stays incomplete) before its folder may be reused."""
        previous = self._epoch
        if previous is None:
            return
        if not previous.flushed and self._thread is not None and self._thread.is_alive():
            self._finish(previous, complete=False, raise_errors=False)
        if previous.error is not None and not previous.error_reported:
            warnings.warn(f"debug pages of {previous.output_dir} are incomplete: {previous.error_context}"
                          f"{previous.error}", RuntimeWarning, stacklevel=3)

    def _ensure_thread(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._cond:
            self._queue.clear()
            self._in_flight = 0
            self._held.clear()
            self._fatal = None
        self._thread = threading.Thread(target=self._run, name="lantern-page-writer", daemon=True)
        self._thread.start()

    def _finish(self, epoch: _Epoch, complete: bool, raise_errors: bool) -> None:
        command = _Finish(epoch, complete)
        with self._cond:
            self._queue.append(command)
            self._cond.notify_all()
            self._wait_for(lambda: command.done, epoch if raise_errors else None, "write the last page")
        if raise_errors:
            self._raise_if_failed(epoch, "write the last page")

    def _wait_for(self, ready: Callable[[], bool], epoch: _Epoch | None, what: str) -> None:
        """Wait (lock held) until ``ready()``; raise instead of hanging on a failed, dead or stuck worker (at once
        when it is known to be stuck: ``stuck``)."""
        progress, since = self._progress, time.monotonic()
        while not ready():
            if epoch is not None:
                self._raise_if_failed(epoch, what)
            else:
                self._check_worker(what)
            if progress == self._stuck_at or time.monotonic() - since > self.stall_timeout_s:
                self._stuck_at = progress
                raise TimeoutError(f"the debug page writer made no progress for {self.stall_timeout_s:g} s or more "
                                   f"while waiting to {what}: the disk under {self._epoch.output_dir} seems stuck "
                                   "(hung network filesystem?). Check the disk, or raise stall_timeout_s.")
            self._cond.wait(_POLL_S)
            if self._progress != progress:
                progress, since = self._progress, time.monotonic()

    def _check_worker(self, what: str) -> None:
        if self._thread is None or not self._thread.is_alive():
            raise WriterThreadError(f"the background page writer thread stopped ({self._fatal!r}) before it could "
                                  f"{what}; call start_epoch() to restart it") from self._fatal

    def _raise_if_failed(self, epoch: _Epoch, what: str) -> None:
        """Raise the epoch's recorded failure (each time until start_epoch), or a dead worker."""
        if epoch.error is not None:
            epoch.error_reported = True
            raise WriterThreadError(
                f"debug pages for {epoch.output_dir} could not be written: {epoch.error_context}{epoch.error} "
                "The pages of this epoch are incomplete (index 'complete': false); "
                "start_epoch() starts the next epoch afresh.") from epoch.error
        self._check_worker(what)

    # ------------------------------------------------------- worker side
    def _run(self) -> None:
        epoch = None
        try:
            while (command := self._next_command()) is not None:
                epoch = command.epoch
                if isinstance(command, _Item):
                    self._store([command, *self._queued_items(epoch)])
                else:
                    self._complete(command)
        except BaseException as exc:  # keep it for the caller; a waiting caller notices the dead thread
            with self._cond:
                self._fatal = exc
                self._cond.notify_all()
        finally:
            if epoch is not None:  # closed, or failed: what this thread may hold open goes
                self._let_go(epoch)

    def _next_command(self) -> _Item | _Finish | None:
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait(_POLL_S)
            return None if self._closed else self._queue.popleft()

    def _queued_items(self, epoch: _Epoch) -> list[_Item]:
        """The batches of ``epoch`` queued behind the one taken (the disk or this thread is behind): they are
        written together, one system call for all, their records encoded one after the other."""
        with self._cond:
            items = []
            while self._queue and len(items) < _GROUP_ITEMS and isinstance(self._queue[0], _Item) \
                    and self._queue[0].epoch is epoch:
                items.append(self._queue.popleft())
            return items

    def _step(self, released: list[int] = ()) -> None:
        with self._cond:
            for key in released:
                entry = self._held[key]
                entry[2] -= 1
                if entry[2] == 0:
                    del self._held[key]
                    self._in_flight -= entry[1]
            self._progress += 1
            self._cond.notify_all()

    def _record(self, epoch: _Epoch, exc: Exception, context: str) -> None:
        if epoch.error is None:
            epoch.error, epoch.error_context = exc, context
        self._let_go(epoch)

    @staticmethod
    def _let_go(epoch: _Epoch) -> None:
        """Close the epoch's locations file and drop its unfinished page (its temporary file, and the disk blocks
        reserved for it, go): the epoch failed, or the writer stopped before it was flushed."""
        with contextlib.suppress(OSError):
            epoch.locations.close()
        if epoch.page is not None:
            epoch.page.discard()
            epoch.page = None

    def _store(self, items: list[_Item]) -> None:
        """Append the batches ``items`` (of one epoch) to its pages and write them."""
        epoch = items[0].epoch
        try:
            for item in items:
                done = 0
                while epoch.error is None and done < len(item.indices):
                    batch_value = item.batch_value if not done or item.batch_value is None \
                        else take_rows(item.batch_value, slice(done, None))
                    done += self._append(epoch, item.indices[done:], item.values[done:], batch_value)
            if epoch.error is None and epoch.page is not None:
                epoch.page.write_pending()
        except Exception as exc:
            self._record(epoch, exc, "")
        finally:
            for item in items:
                item.values = item.batch_value = None  # on disk now: its memory is no longer held
            self._step([owner for item in items for owner in item.owners])

    def _append(self, epoch: _Epoch, indices: list[int], values: list[Any], batch_value: Any) -> int:
        """Append datapoints to the open page until it is full (then sealed); returns how many."""
        try:
            if epoch.page is None:
                name = page_file_name(self.rank, self.world_size, epoch.pages)
                epoch.page = PageFile(os.path.join(epoch.output_dir, name), epoch.pages, self.page_size_bytes,
                                      self.direct_io)
            count = epoch.page.append_batch(indices, values, self.page_size_bytes, batch_value)
        except Exception as exc:
            self._record(epoch, exc, f"datapoints idx={indices[0]}..{indices[-1]}: ")
            return len(indices)
        if epoch.page.size >= self.page_size_bytes:
            self._seal_page(epoch)
        return count

    def _seal_page(self, epoch: _Epoch, write_the_index: bool = True) -> None:
        """Seal the open page and append its rows to the locations file, then (unless the caller writes it
        right after) rewrite the index."""
        page, epoch.page = epoch.page, None
        try:
            rows = page.seal()
            epoch.disk_bytes += page.size
            epoch.pages += 1
            epoch.locations.append(rows)
            epoch.datapoints += len(rows)
            if len(rows):
                first = epoch.last_idx is None or epoch.last_idx < rows["idx"][0]
                epoch.sorted = bool(epoch.sorted and first and (rows["idx"][1:] > rows["idx"][:-1]).all())
                epoch.last_idx = int(rows["idx"][-1])
            if write_the_index:
                write_index(epoch.index_path, self._index(epoch, complete=False))
        except Exception as exc:
            page.discard()
            self._record(epoch, exc, "")
        finally:
            self._step()

    def _complete(self, command: _Finish) -> None:
        epoch = command.epoch
        if epoch.error is None and epoch.page is not None:
            self._seal_page(epoch, write_the_index=False)  # written below
        if epoch.error is None:
            try:
                epoch.locations.close()
                if command.complete and not epoch.sorted:
                    sort_locations(epoch.locations.path, epoch.datapoints)
                    epoch.sorted = True
                write_index(epoch.index_path, self._index(epoch, complete=command.complete))
            except Exception as exc:
                self._record(epoch, exc, "")
        with self._cond:
            command.done = True
        self._step()

    def _index(self, epoch: _Epoch, complete: bool) -> dict:
        return {"version": INDEX_VERSION, "rank": self.rank, "world_size": self.world_size, "complete": complete,
                "pages": epoch.pages, "datapoints": epoch.datapoints, "sorted": epoch.sorted}


def _as_indices(indices: list[Any]) -> list[int]:
    try:
        return list(map(operator.index, indices))
    except TypeError:
        return [_as_idx(idx) for idx in indices]  # the error names the idx


def _repeated(indices: list[int], seen: set[int]) -> int:
    """The first of ``indices`` seen before, in ``seen`` or earlier in ``indices`` (there is one)."""
    earlier: set[int] = set()
    return next(idx for idx in indices if idx in seen or idx in earlier or earlier.add(idx))  # add() is None


def _as_idx(idx: Any) -> int:
    try:
        return operator.index(idx)
    except TypeError:
        raise TypeError(f"datapoint idx must be an int (meta_info['idx'] of one datapoint), "
                        f"got {type(idx).__name__} {idx!r}") from None
