r"""On-disk format of debug pages (format 2): one datapoint is read without touching the others.

A page ``page_{n}.pkl`` (``page_rank{r}_{n}.pkl`` under torchrun) is written by
appending one *record* per datapoint as its outputs arrive, so no page is ever
held in memory. Every record is a stretch of pickle opcodes that sets
``page[idx] = outputs``, followed by a JSON *header* that describes the same
outputs with each array's place in the file::

    b'\x80\x05'                         PROTO 5
    b'\x8c\x0elantern-page-2' b'0'        the format's name, pushed and popped
    b'}'                                 EMPTY_DICT: the page
    records, one per datapoint, alone or in batches (below)
    b'\x8e' <u64 n> <n bytes> b'0'       footer: this page's location table, pushed and popped
    b'.'                                 STOP
    <u64 footer offset> <u64 records> b'LNTNEND2'   trailer (after STOP: pickle never reads it)

A record alone::

    idx                                  the datapoint's idx (an int opcode: J <i4> in int32's range)
    outputs                              dicts, lists, numbers as opcodes; an array as
                                         _frombuffer(BYTEARRAY8 <raw bytes>, dtype, shape, 'C')
    b'X' <u32 n> <n bytes of JSON>       the header (an array: {"a": [offset, dtype, shape]}), pushed ...
    b'0' b's'                            ... popped; SETITEM

A batch of records of one structure (``debuggers.pages.encoding``) puts the arrays of
each slot first, one after the other, and its records refer to them::

    for each array slot j:  [b'C' <u8 n> <n bytes> b'0']   padding, pushed and popped (b'B' <u32 n> over 255
                                                             bytes): the arrays start at an offset aligned as
                                                             they are in memory (to 4 KiB for a big stretch
                                                             in a block of its own in memory, else to 64 bytes)
                            b'\x96' <u64 n> <the slot's arrays, row after row>   BYTEARRAY8
                            b'r' <u32 j> b'0'               LONG_BINPUT into memo slot j, POP
    records                 as above, but an array is numpy.ndarray(shape, dtype, memo[j], row * nbytes)
                            and its header entry {"r": [stretch offset, row, dtype, shape]}

Numbers in a header are padded with spaces to fixed widths, so that records of one
structure have one length; JSON ignores the spaces.

So a whole page loads with ``pickle.load`` / ``joblib.load`` (on files you trust),
while Lantern's reader never unpickles anything: it finds a datapoint's record in
a location table (``LOCATION`` rows: idx, start, header offset and length, page),
parses the small JSON header and reads each array's bytes at its offset with
``os.preadv``, nothing else. ``start`` is where the bytes the record may refer to
begin: the record's own start, or its batch's. A crafted page can therefore run no
code, and the work of a read is bounded by the bytes the file really holds: a record's
arrays must lie between its ``start`` and its header without overlapping (a batch's
records each read their own rows of its stretches), so one datapoint costs its own bytes
at most, and the reads of a whole page are counted against its size (``ReadBudget``), so
location rows or headers pointing at the same bytes again and again are refused. A header
is parsed only within bounds (``MAX_HEADER_BYTES``, and ``MAX_HEADER_NODES`` values and
containers, counted in its bytes first): a crafted header of many tiny values
(``[[],[],...]``) would cost tens of times its size in memory; the writer never writes one.

A stretch of 2 MiB or more that starts a 4 KiB block in memory and in the file (the
copies of ``AttentionDebugger``, made in ``BufferPool`` buffers) is written with
``O_DIRECT``: its bytes go from the buffer to the disk, without a copy into the page
cache, which on a virtual machine can cost more CPU than the model's forward pass
beside it. Only on the file systems of local disks (ext4, XFS: ``DIRECT_FILE_SYSTEMS``);
elsewhere, and for the rest of a page whose file system refuses it, pages go through
the page cache. The bytes in the file are the same either way.

Pages are written under a hidden temporary name and renamed when sealed: a page
on disk is complete or absent, even after SIGKILL, and ``PAGE_GLOB`` never
matches a temporary file. Only regular files are opened (a FIFO named like a
page is refused without blocking), never through a symlink.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import io
import json
import math
import os
import re
import struct
from typing import Any

import numpy as np

from debuggers.pages.encoding import (
    DIRECT_ALIGN,
    DIRECT_MIN_BYTES,
    HEADER_OPCODE_BYTES,
    MAX_HEADER_BYTES,
    MAX_HEADER_NODES,
    MIN_BATCH_RECORDS,
    U64,
    RecordEncoder,
    array_address,
    header_nodes,
    outline_groups,
)
from debuggers.pages.errors import CorruptPageError, DebugDataError, PageWriteError, UnsafePageError
from debuggers.pages.legacy import load_legacy_page
from debuggers.pages.value_rules import MAX_DEPTH
from run_dir.run_files import open_regular
from utils.atomic_files import TEMP_MARKER, temporary_path

# The errors are re-exported: a reader of pages needs only this module.
__all__ = ["PAGE_GLOB", "INDEX_GLOB", "LOCATIONS_GLOB", "LOCATION", "CorruptPageError", "DebugDataError",
           "PageWriteError", "UnsafePageError", "PageFile", "write_page", "load_page", "read_record", "read_footer",
           "ReadBudget", "page_file_name", "index_file_name", "locations_file_name",
           "is_own_file"]

PAGE_GLOB = "page_*.pkl"
INDEX_GLOB = "index*.json"
LOCATIONS_GLOB = "locations*.bin"
FORMAT_NAME = b"lantern-page-2"
_PROLOGUE = b"\x80\x05\x8c" + bytes([len(FORMAT_NAME)]) + FORMAT_NAME + b"0}"
_END_MAGIC = b"LNTNEND2"
_TRAILER = struct.Struct("<QQ8s")
_FOOTER_TAIL = b"0."  # POP the footer bytes, STOP
LOCATION = np.dtype([("idx", "<i8"), ("start", "<u8"), ("header", "<u8"), ("header_length", "<u4"),
                     ("page", "<u4")])

_IOV_MAX = 1024
RESERVE_STEP = 16 * 1024 * 1024  # a page's blocks are reserved this far ahead of its writes
RECORD_ROOM = 16 * 1024  # what a record takes besides the arrays ``outline_groups`` counts, as a batch's fit is judged
_FALLOC_FL_KEEP_SIZE = 1
_libc = ctypes.CDLL(None, use_errno=True)
_fallocate = getattr(_libc, "fallocate", None)  # Linux's; None elsewhere
if _fallocate is not None:
    _fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
_statfs = getattr(_libc, "statfs", None)
# File systems of local disks where O_DIRECT writes are plain and fast (statfs's f_type): ext2/3/4, XFS. Elsewhere
# (network and FUSE file systems, tmpfs, btrfs, ZFS) pages go through the page cache.
DIRECT_FILE_SYSTEMS = (0xEF53, 0x58465342)
_REFUSED = (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP)  # an O_DIRECT write the file system does not take
_MAX_DTYPE_TEXT = 32


# ------------------------------------------------------------------ names
def page_file_name(rank: int, world_size: int, page_number: int) -> str:
    return f"page_{page_number}.pkl" if world_size == 1 else f"page_rank{rank}_{page_number}.pkl"


def index_file_name(rank: int, world_size: int) -> str:
    return "index.json" if world_size == 1 else f"index_rank{rank}.json"


def locations_file_name(rank: int, world_size: int) -> str:
    return "locations.bin" if world_size == 1 else f"locations_rank{rank}.bin"


def page_number(name: str, rank: int, world_size: int) -> int | None:
    """The page number in ``name`` when it is one of this rank's page names, else None."""
    pattern = r"page_(\d+)\.pkl" if world_size == 1 else rf"page_rank{rank}_(\d+)\.pkl"
    match = re.fullmatch(pattern, name)
    return int(match.group(1)) if match else None


def is_own_file(name: str, rank: int, world_size: int) -> bool:
    """True for a page, index, locations or temporary file that this rank writes (and may delete)."""
    if world_size == 1:
        base = r"page_\d+\.pkl|index\.json|locations\.bin"
    else:
        base = rf"page_rank{rank}_\d+\.pkl|index_rank{rank}\.json|locations_rank{rank}\.bin"
    temp = rf"\.(?:{base}){re.escape(TEMP_MARKER)}\d+-\d+"  # utils.atomic_files.temporary_path
    return re.fullmatch(rf"(?:{base})|{temp}", name) is not None


# ----------------------------------------------------------------- writing
class PageFileIO(io.FileIO):
    """A page's temporary file, written at ``position``; ``direct`` is a second descriptor of it opened with
    ``O_DIRECT`` when asked for on a local disk's file system (``DIRECT_FILE_SYSTEMS``), else None."""

    def __init__(self, path: str, direct_io: bool = True) -> None:
        super().__init__(path, "wb")
        self.position = 0
        self.direct: int | None = None
        if direct_io and _file_system(path) in DIRECT_FILE_SYSTEMS:
            with contextlib.suppress(AttributeError, OSError):  # no O_DIRECT here (macOS), or refused
                self.direct = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_DIRECT)

    def stop_direct(self) -> None:
        fd, self.direct = self.direct, None
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        try:
            self.stop_direct()
        finally:
            super().close()


def _file_system(path: str) -> int | None:
    """The type of the file system ``path`` is on (``statfs``'s f_type, a C long first in its struct)."""
    result = ctypes.create_string_buffer(256)
    if _statfs is None or _statfs(os.fsencode(path), result) != 0:
        return None
    return ctypes.c_long.from_buffer(result).value


def _append(file: PageFileIO, buffers: list[Any]) -> None:
    """The one low-level disk write (tests inject slow, failing or stuck disks here).

    ``buffers`` are bytes, bytearrays and C-contiguous arrays, written as they are at ``file.position``: with
    ``pwritev``, but the whole blocks of an array of ``DIRECT_MIN_BYTES`` or more that starts a block in memory
    and in the file with ``O_DIRECT`` (``_write_direct``)."""
    pending: list[Any] = []
    end = file.position  # where the pending buffers end
    for buffer in buffers:
        size = buffer.nbytes if type(buffer) is np.ndarray else len(buffer)
        if file.direct is not None and type(buffer) is np.ndarray and size >= DIRECT_MIN_BYTES \
                and end % DIRECT_ALIGN == 0 and array_address(buffer) % DIRECT_ALIGN == 0:
            _write_at(file.fileno(), pending, file.position)
            whole = size - size % DIRECT_ALIGN
            data = _bytes_of(buffer)
            _write_direct(file, data[:whole], end)
            end += whole
            file.position, pending, buffer, size = end, [], data[whole:], size - whole
        if size:
            pending.append(buffer)
            end += size
    _write_at(file.fileno(), pending, file.position)
    file.position = end


def _write_direct(file: PageFileIO, data: Any, offset: int) -> None:
    """``data`` (whole blocks) at ``offset`` with ``O_DIRECT``; where the file system refuses it, through the page
    cache, as the rest of the page then goes."""
    done = 0
    while done < len(data) and file.direct is not None:
        try:
            written = os.pwrite(file.direct, data[done:], offset + done)
        except OSError as exc:
            if exc.errno not in _REFUSED:
                raise
            written = 0
        done += written
        if not written:
            file.stop_direct()
    if done < len(data):
        _write_at(file.fileno(), [data[done:]], offset + done)


def _write_at(fd: int, buffers: list[Any], offset: int) -> None:
    """``buffers`` at ``offset`` with ``pwritev``, IOV_MAX at a time, short writes resumed."""
    sizes = [b.nbytes if type(b) is np.ndarray else len(b) for b in buffers]
    first = 0
    while first < len(buffers):
        last = min(first + _IOV_MAX, len(buffers))
        written = os.pwritev(fd, buffers[first:last], offset)
        offset += written
        if written == sum(sizes[first:last]):
            first = last
            continue
        while written >= sizes[first]:  # a short write: the rest goes in the next call
            written -= sizes[first]
            first += 1
        buffers = [*buffers[:first], _bytes_of(buffers[first])[written:], *buffers[first + 1:]]
        sizes[first] -= written


def _bytes_of(buffer: Any) -> Any:
    """A buffer's bytes, to slice (an array of any dtype: datetimes have no format a memoryview can cast)."""
    return buffer.reshape(-1).view(np.uint8) if type(buffer) is np.ndarray else memoryview(buffer).cast("B")


def reserve_blocks(fd: int, offset: int, nbytes: int) -> bool:
    """Reserve the disk blocks of bytes about to be written (``fallocate``, the file's size kept), as
    ``numpy.save`` does: ext4 then allocates them at once rather than block by block, about a fifth less
    CPU for a 16 MB write here. Best effort: False where the call is missing or refused (a full disk)."""
    return _fallocate is not None and _fallocate(fd, _FALLOC_FL_KEEP_SIZE, offset, nbytes) == 0


class PageFile:
    """One page being written: records appended as outputs arrive, sealed and renamed when full.

    Its disk blocks are reserved ahead of the writes, ``RESERVE_STEP`` at a time up to ``expected_bytes``
    (the page size it will be sealed at, when known): one ``fallocate`` for many batches. The blocks
    reserved past its end are given back when it is sealed, so a sealed page takes only its own size.
    ``direct_io``: its big stretches in buffers of their own go to the disk with O_DIRECT (``_append``)."""

    def __init__(self, path: str, number: int, expected_bytes: int = 0, direct_io: bool = True) -> None:
        self.path, self.number = path, number
        self._locations = _Locations()
        self._temp = temporary_path(path)
        with _disk_errors(self._temp, path, "page"):
            self._file = PageFileIO(self._temp, direct_io)
        self._encoder = RecordEncoder(0)
        self._encoder.small += _PROLOGUE
        self._expected = expected_bytes
        self._reserved = 0  # bytes whose blocks are reserved, from the start

    @property
    def size(self) -> int:
        """The page's size once what is pending is written."""
        return self._encoder.position

    def append(self, idx: int, value: Any) -> None:
        """Encode one datapoint's record (``value`` from ``to_page_value``); ``write_pending`` writes it."""
        start, header, length = self._encoder.record(idx, value)
        self._locations.add([idx], start, [header], length)

    def append_batch(self, indices: list[int], values: list[Any], limit: int | None = None,
                     batch_value: Any = None) -> int:
        """``append`` the datapoints ``indices`` in turn until the page's size reaches ``limit`` bytes (all
        when None); returns how many were appended.

        A batch whose values share one structure is encoded at once (``RecordEncoder.records``; from
        ``batch_value``, the same datapoints in column form, when given); a batch of several structures, one
        structure at a time where it fits in the page (``_append_by_structure``)."""
        if len(indices) >= MIN_BATCH_RECORDS:
            count = self._append_records(indices, values, limit, batch_value)
            if count is not None:
                return count
            if self._append_by_structure(indices, values, limit):
                return len(indices)
        for count, (idx, value) in enumerate(zip(indices, values), 1):
            self.append(idx, value)
            if limit is not None and self.size >= limit:
                return count
        return len(indices)

    def _append_records(self, indices: list[int], values: list[Any], limit: int | None,
                        batch_value: Any = None) -> int | None:
        """The first datapoints up to ``limit`` encoded as one batch; how many, or None (nothing appended) unless
        they share one structure."""
        batch = self._encoder.records(indices, values, limit, batch_value)
        if batch is None:
            return None
        start, headers, header_length = batch
        self._locations.add(indices if len(headers) == len(indices) else indices[:len(headers)], start, headers,
                            header_length)
        return len(headers)

    def _append_by_structure(self, indices: list[int], values: list[Any], limit: int | None) -> bool:
        """A batch of several structures (an output part that some datapoints have and others lack): the
        datapoints of each outline (``outline_groups``) encoded as a batch of their own, those of a rare one (or
        of an outline whose values still differ) one by one; the records go to the page one outline after the
        other, the locations say where each is. Only where the whole batch stays below ``limit`` (its arrays,
        and ``RECORD_ROOM`` a record besides); False, nothing appended, otherwise."""
        groups, array_bytes = outline_groups(values)
        if max(map(len, groups)) < MIN_BATCH_RECORDS or \
                (limit is not None and self.size + array_bytes + len(values) * RECORD_ROOM >= limit):
            return False
        for group in groups:
            group_indices, group_values = [indices[i] for i in group], [values[i] for i in group]
            if len(group) < MIN_BATCH_RECORDS or self._append_records(group_indices, group_values, None) is None:
                for idx, value in zip(group_indices, group_values):
                    self.append(idx, value)
        return True

    def write_pending(self) -> None:
        """Write the records appended so far (one system call for many): after it, no array is referenced."""
        with _disk_errors(self._temp, self.path, "page"):
            self._reserve_ahead(self.size)
            _append(self._file, self._encoder.take())

    def _reserve_ahead(self, end: int) -> None:
        """Reserve the blocks up to ``end``, and ahead of it up to the expected size (a step at most)."""
        if end <= self._reserved:
            return
        ahead = max(end, min(self._expected, self._file.position + RESERVE_STEP))
        fd = self._file.fileno()
        if not reserve_blocks(fd, self._reserved, ahead - self._reserved):
            reserve_blocks(fd, self._reserved, end - self._reserved)  # a nearly full disk: the bytes to write, if any
            ahead = end
        self._reserved = ahead

    def seal(self) -> np.ndarray:
        """Write the footer, close, and rename into place; returns the page's ``LOCATION`` rows."""
        table = self._locations.table(self.number)
        self._encoder.small += b"\x8e" + U64.pack(table.nbytes)
        footer_offset = self._encoder.raw(table.view(np.uint8), table.nbytes)
        self._encoder.small += _FOOTER_TAIL + _TRAILER.pack(footer_offset, len(table), _END_MAGIC)
        self.write_pending()
        with _disk_errors(self._temp, self.path, "page"):
            if self._reserved > self.size:
                os.ftruncate(self._file.fileno(), self.size)  # gives back the blocks reserved past the end
            self._file.close()
            os.replace(self._temp, self.path)
        return table

    def discard(self) -> None:
        """Drop the unfinished page: its temporary file is removed, nothing is renamed."""
        self._file.close()
        with contextlib.suppress(OSError):
            os.remove(self._temp)


class _Locations:
    """A page's ``LOCATION`` rows, gathered as its records are appended and made into its table once, when the
    page is sealed (a batch adds a few list items, no array)."""

    def __init__(self) -> None:
        self.indices: list[int] = []
        self.starts: list[int] = []  # per batch (or record alone): where its bytes begin
        self.counts: list[int] = []  # its records
        self.headers: list[Any] = []  # its records' header offsets
        self.header_lengths: list[int] = []

    def add(self, indices: list[int], start: int, headers: Any, header_length: int) -> None:
        self.indices += indices
        self.starts.append(start)
        self.counts.append(len(indices))
        self.headers.append(headers)
        self.header_lengths.append(header_length)

    def table(self, page: int) -> np.ndarray:
        table = np.empty(len(self.indices), LOCATION)
        if len(table):
            table["idx"] = self.indices
            table["start"] = np.repeat(self.starts, self.counts)
            table["header"] = np.concatenate(self.headers)
            table["header_length"] = np.repeat(self.header_lengths, self.counts)
            table["page"] = page
        return table


@contextlib.contextmanager
def _disk_errors(temp: str, path: str, what: str):
    """OSErrors as ``PageWriteError`` saying what failed, where, and how to fix it; the temporary file goes."""
    try:
        yield
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.remove(temp)
        raise PageWriteError(
            f"could not write debug {what} {path}: {exc.strerror or exc} ({type(exc).__name__}). "
            "Free disk space, check that the folder exists and is writable, or lower page_size_mb.",
            path, exc.errno) from exc


def write_page(path: str, page: dict[int, Any], number: int = 0) -> np.ndarray:
    """Write a whole ``{idx: page value}`` page at once; ``path`` is then complete or absent."""
    page_file = PageFile(path, number)
    try:
        page_file.append_batch(list(page), list(page.values()))
        return page_file.seal()
    except BaseException:
        page_file.discard()
        raise


# ----------------------------------------------------------------- reading
def pread_exact(fd: int, nbytes: int, offset: int, path: str) -> np.ndarray:
    """``nbytes`` at ``offset`` as a fresh uint8 array; a short file is a corrupt one."""
    buffer = np.empty(nbytes, np.uint8)
    done = 0
    while done < nbytes:
        got = os.preadv(fd, [memoryview(buffer)[done:]], offset + done)
        if got == 0:
            raise CorruptPageError(f"debug file {path} ends before byte {offset + nbytes}: it is truncated; "
                                   "rerun the epoch to regenerate it")
        done += got
    return buffer


class _Malformed(Exception):
    """A header that does not describe a well-formed record."""


class ReadBudget:
    """The bytes a reader may still take from a page file: no more than the file holds. Location rows or
    headers that point at the same bytes again and again could otherwise make reading a page (or an epoch)
    cost its size many times over; a Lantern page's records never share a byte."""

    def __init__(self, path: str, nbytes: int) -> None:
        self.path, self.size, self.left = path, nbytes, nbytes

    def spend(self, nbytes: int) -> None:
        if nbytes > self.left:
            raise CorruptPageError(f"debug page {self.path}: its records add up to more than the file's {self.size} "
                                   "bytes, so they share bytes, which Lantern never writes: this is not a page "
                                   "Lantern wrote; delete it and rerun the epoch")
        self.left -= nbytes


class _RecordReader:
    """Rebuilds one record's outputs from its JSON header, reading each array's bytes within the record.

    The arrays of one record must not overlap, so a record's reads add up to its own bytes at most: the running
    total is checked before each read, the overlap once at the end (``check_disjoint``). Records of one batch
    share its stretches, each reading its own rows: the check is per record, not per stretch."""

    def __init__(self, fd: int, path: str, start: int, data_end: int, budget: ReadBudget | None = None) -> None:
        self.fd, self.path, self.start, self.data_end, self.budget = fd, path, start, data_end, budget
        self.extents: list[tuple[int, int]] = []
        self.spent = 0

    def value(self, node: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise _Malformed(f"outputs nested more than {MAX_DEPTH} levels deep")
        if node is None or type(node) in (bool, int, float, str):
            return node
        if type(node) is list:
            return [self.value(item, depth + 1) for item in node]
        if type(node) is not dict or len(node) != 1:
            raise _Malformed(f"a header entry {str(node)[:80]!r}")
        (tag, body), = node.items()
        if tag == "a":
            return self.array(body)
        if tag == "r":
            return self.row(body)
        if tag == "d" and type(body) is list:
            return self.dict(body, depth)
        if tag == "t" and type(body) is list:
            return tuple(self.value(item, depth + 1) for item in body)
        if tag == "b" and _ints(body, 2):
            return self.read(body[0], body[1]).tobytes()
        if tag == "c" and type(body) is list and len(body) == 2 and all(type(x) in (int, float) for x in body):
            return complex(*body)
        raise _Malformed(f"a header entry tagged {tag!r}")

    def dict(self, pairs: list, depth: int) -> dict:
        result = {}
        for pair in pairs:
            if not (type(pair) is list and len(pair) == 2 and type(pair[0]) in (str, int, bool)):
                raise _Malformed(f"a dict entry {str(pair)[:80]!r}")
            result[pair[0]] = self.value(pair[1], depth + 1)
        return result

    def array(self, body: Any) -> np.ndarray:
        """``[offset, dtype, shape]``: the array's bytes are at ``offset``."""
        if not (type(body) is list and len(body) == 3 and type(body[0]) is int):
            raise _Malformed(f"an array entry {str(body)[:80]!r}")
        dtype, shape = _dtype_and_shape(body[1], body[2])
        return self.read(body[0], math.prod(shape) * dtype.itemsize).view(dtype).reshape(shape)

    def row(self, body: Any) -> np.ndarray:
        """``[stretch, row, dtype, shape]``: a batch's arrays lie one after the other from ``stretch``."""
        if not (type(body) is list and len(body) == 4 and _ints(body[:2], 2)):
            raise _Malformed(f"an array entry {str(body)[:80]!r}")
        dtype, shape = _dtype_and_shape(body[2], body[3])
        nbytes = math.prod(shape) * dtype.itemsize
        return self.read(body[0] + body[1] * nbytes, nbytes).view(dtype).reshape(shape)

    def read(self, offset: int, nbytes: int) -> np.ndarray:
        if not (self.start <= offset and offset + nbytes <= self.data_end):
            raise _Malformed(f"data at bytes {offset}..{offset + nbytes}, outside its record "
                             f"({self.start}..{self.data_end})")
        self.spent += nbytes
        if self.spent > self.data_end - self.start:
            raise _Malformed(f"arrays of more bytes in all than its record holds ({self.data_end - self.start}): "
                             "they overlap")
        if self.budget is not None:
            self.budget.spend(nbytes)
        if nbytes:
            self.extents.append((offset, nbytes))
        return pread_exact(self.fd, nbytes, offset, self.path)

    def check_disjoint(self) -> None:
        """Each byte of the record belongs to one array at most, as Lantern writes them."""
        end = 0
        for offset, nbytes in sorted(self.extents):
            if offset < end:
                raise _Malformed(f"arrays that overlap at byte {offset}")
            end = offset + nbytes


def _dtype_and_shape(text: Any, shape: Any) -> tuple[np.dtype, list[int]]:
    """An array entry's dtype and shape, checked: plain numbers only, the shape's dimensions not negative."""
    if not (type(text) is str and len(text) <= _MAX_DTYPE_TEXT and type(shape) is list and len(shape) <= MAX_DEPTH
            and _ints(shape, len(shape))):
        raise _Malformed(f"an array's dtype {str(text)[:40]!r} and shape {str(shape)[:40]!r}")
    try:
        dtype = np.dtype(text)
    except (TypeError, ValueError, SyntaxError) as exc:
        raise _Malformed(f"an array dtype {text!r}") from exc
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None or dtype.itemsize == 0:
        raise _Malformed(f"an array dtype {text!r}, which Lantern never writes")
    return dtype, shape


def _ints(values: Any, count: int) -> bool:
    return type(values) is list and len(values) == count and all(type(v) is int and v >= 0 for v in values)


def read_record(fd: int, file_size: int, location: np.void, path: str, budget: ReadBudget | None = None) -> Any:
    """The outputs of the datapoint at ``location`` (a ``LOCATION`` row) in the open page ``fd``; its header's and
    arrays' bytes are spent from ``budget`` when given (a whole page read: ``load_page``)."""
    start, header, length = int(location["start"]), int(location["header"]), int(location["header_length"])
    if not (len(_PROLOGUE) <= start and start + HEADER_OPCODE_BYTES <= header
            and header + length + 2 + _TRAILER.size <= file_size):
        raise CorruptPageError(f"debug page {path} is truncated or not a Lantern page: it has no record at bytes "
                               f"{start}..{header + length} for datapoint {int(location['idx'])}; rerun the epoch")
    if length > MAX_HEADER_BYTES:
        raise _oversized_header(path, location, f"{length} bytes long (at most {MAX_HEADER_BYTES})")
    if budget is not None:
        budget.spend(length)
    text = pread_exact(fd, length, header, path).tobytes()
    nodes = header_nodes(text)
    if nodes > MAX_HEADER_NODES:
        raise _oversized_header(path, location, f"made of {nodes} JSON values and containers (at most "
                                                f"{MAX_HEADER_NODES})")
    try:
        tree = json.loads(text)
        reader = _RecordReader(fd, path, start, header - HEADER_OPCODE_BYTES, budget)
        value = reader.value(tree)
        reader.check_disjoint()
        return value
    except (_Malformed, ValueError, RecursionError, OverflowError) as exc:
        if isinstance(exc, CorruptPageError):
            raise
        raise CorruptPageError(f"debug page {path} is damaged or not a Lantern page: the record of datapoint "
                               f"{int(location['idx'])} is malformed ({type(exc).__name__}: {exc}); rerun the epoch "
                               "to regenerate it") from None


def _oversized_header(path: str, location: np.void, what: str) -> CorruptPageError:
    """A header over a bound: parsing it would cost tens of times its size in memory, and seconds per MB."""
    return CorruptPageError(f"debug page {path} is not a page Lantern wrote: the record of datapoint "
                            f"{int(location['idx'])} has a header {what}, which Lantern never writes; it was not "
                            "read. Delete the page and rerun the epoch to regenerate it")


def is_page_format_2(fd: int) -> bool:
    return os.pread(fd, len(_PROLOGUE), 0) == _PROLOGUE


def read_footer(fd: int, file_size: int, path: str) -> np.ndarray:
    """A sealed page's own ``LOCATION`` table, checked against the file's size."""
    if file_size < len(_PROLOGUE) + _TRAILER.size or not is_page_format_2(fd):
        raise CorruptPageError(f"debug page {path} is not a format-2 Lantern page (wrong start or too short); "
                               "delete it and rerun the epoch")
    footer_offset, count, magic = _TRAILER.unpack(pread_exact(fd, _TRAILER.size, file_size - _TRAILER.size, path))
    if magic != _END_MAGIC or footer_offset + count * LOCATION.itemsize + len(_FOOTER_TAIL) + _TRAILER.size \
            != file_size:
        raise CorruptPageError(f"debug page {path} has no valid footer: it is truncated or damaged; "
                               "delete it and rerun the epoch")
    table = pread_exact(fd, count * LOCATION.itemsize, footer_offset, path).view(LOCATION)
    if len(np.unique(table["idx"])) != len(table):
        raise CorruptPageError(f"debug page {path} lists a datapoint twice; delete it and rerun the epoch")
    return table


def load_page(path: str) -> dict[int, Any]:
    """A whole page as ``{idx: outputs}``; runs nothing from the file (previous-format pages too)."""
    fd = open_regular(path, "debug page", CorruptPageError)
    try:
        size = os.fstat(fd).st_size
        if os.pread(fd, 1, 0) == b"\x80" and not is_page_format_2(fd):
            with open(fd, "rb", closefd=False) as file:
                return load_legacy_page(file, path)
        budget = ReadBudget(path, size)  # the footer's rows may point at the same bytes: read them once at most
        return {int(row["idx"]): read_record(fd, size, row, path, budget) for row in read_footer(fd, size, path)}
    finally:
        os.close(fd)
