r"""The training monitor's file: an append-only log of frames that a kill leaves complete or absent.

``work_dir/training_monitor.bin`` (written by rank 0 of a trainer whose config has ``training_monitor``)::

    file    = MAGIC frame*
    frame   = length:u32 crc32:u32 payload            (little-endian; length and CRC of the payload)
    payload = json_length:u32 json array_bytes        (JSON: an object of plain fields, plus "arrays":
                                                       [[name, dtype, shape], ...] for the raw arrays that
                                                       follow it, in order; dtypes f4, f8, u1, i8)

Each frame goes to the disk in one ``write`` on a descriptor opened with ``O_APPEND``. A process killed
mid-write leaves at most a torn last frame, whose length or CRC does not check out: a reader stops before
it, and the writer of the resumed run cuts it off before appending (a file killed within its magic holds no
frame yet: it is read as empty and written anew). fsync policy: the file is fsynced at
each epoch's end, after a non-finite step's record and on close (a SIGKILL loses nothing written, as the
page cache keeps it; a power loss loses at most the frames since the last fsync).

A run folder is data: the reader opens regular files only (``open_regular``), never reads a frame longer
than ``MAX_FRAME_BYTES``, a JSON head longer than ``MAX_JSON_BYTES`` or arrays that do not fill their frame
exactly, and stops after ``max_bytes``; what it skips it says in ``FrameRead.problem``.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from run_dir.errors import MonitorFileError
from run_dir.run_files import open_regular

MAGIC = b"LNTMON1\n"
FRAME_HEAD = struct.Struct("<II")  # payload length, CRC-32 of the payload
JSON_HEAD = struct.Struct("<I")
MAX_FRAME_BYTES = 64 * 2**20  # a row of 1M layers is 13 MB; histograms of 100k layers at 256 bins 200 MB: refused
MAX_JSON_BYTES = 2**20
MAX_READ_BYTES = 512 * 2**20  # what a reader reads of one file by default
DTYPES = {"f4": np.dtype("<f4"), "f8": np.dtype("<f8"), "u1": np.dtype("u1"), "i8": np.dtype("<i8")}
_MAX_DIMS = 2


@dataclass
class Frame:
    """One record: its JSON fields (without ``arrays``), its arrays, and the offset just after it."""

    fields: dict[str, Any]
    arrays: dict[str, np.ndarray]
    end: int


@dataclass
class FrameRead:
    """What a read found: the complete frames from ``start``, where the next frame would begin, and why the
    read stopped early (a torn or malformed frame, the byte cap), or None when it reached the end."""

    frames: list[Frame] = field(default_factory=list)
    end: int = len(MAGIC)
    problem: Optional[str] = None


def encode_frame(fields: dict[str, Any], arrays: Optional[dict[str, np.ndarray]] = None) -> bytes:
    """A frame holding ``fields`` (JSON-able, no key ``arrays``) and ``arrays`` (at most 2-D, dtypes of
    ``DTYPES``)."""
    spec, chunks = [], []
    for name, array in (arrays or {}).items():
        code = next((code for code, dtype in DTYPES.items() if dtype == array.dtype.newbyteorder("<")), None)
        if code is None or array.ndim > _MAX_DIMS:
            raise MonitorFileError(f"array {name!r} of dtype {array.dtype} and {array.ndim} dims cannot go in a "
                                   f"monitor frame (dtypes {sorted(DTYPES)}, at most {_MAX_DIMS} dims)")
        spec.append([name, code, list(array.shape)])
        chunks.append(np.ascontiguousarray(array, dtype=DTYPES[code]).tobytes())
    head = json.dumps({**fields, "arrays": spec}, separators=(",", ":")).encode()
    payload = b"".join([JSON_HEAD.pack(len(head)), head, *chunks])
    if len(head) > MAX_JSON_BYTES or len(payload) > MAX_FRAME_BYTES:
        raise MonitorFileError(f"a monitor frame of {len(payload):,} bytes is over the limit of {MAX_FRAME_BYTES:,} "
                               f"(its fields {len(head):,} of {MAX_JSON_BYTES:,})")
    return FRAME_HEAD.pack(len(payload), zlib.crc32(payload)) + payload


def decode_payload(payload: bytes, end: int) -> Frame:
    """The frame a checked payload holds; ``ValueError`` saying what is wrong with it."""
    if len(payload) < JSON_HEAD.size:
        raise ValueError("its payload is shorter than its own header")
    (json_length,) = JSON_HEAD.unpack_from(payload)
    if json_length > min(MAX_JSON_BYTES, len(payload) - JSON_HEAD.size):
        raise ValueError(f"its fields claim {json_length:,} bytes")
    try:
        fields = json.loads(payload[JSON_HEAD.size:JSON_HEAD.size + json_length])
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"its fields are not JSON ({type(exc).__name__})") from None
    if not isinstance(fields, dict) or not isinstance(fields.get("arrays", []), list):
        raise ValueError("its fields are not a JSON object with an 'arrays' list")
    arrays, offset = {}, JSON_HEAD.size + json_length
    for entry in fields.pop("arrays", []):
        name, dtype, shape = _array_spec(entry)
        nbytes = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        if nbytes > len(payload) - offset:
            raise ValueError(f"its array {name!r} runs past the frame")
        arrays[name] = np.frombuffer(payload, dtype, count=nbytes // dtype.itemsize, offset=offset).reshape(shape)
        offset += nbytes
    if offset != len(payload):
        raise ValueError(f"{len(payload) - offset:,} bytes after its arrays")
    return Frame(fields, arrays, end)


def _array_spec(entry: Any) -> tuple[str, np.dtype, tuple[int, ...]]:
    """``[name, dtype code, shape]`` checked: a string, a known dtype, at most 2 non-negative dims."""
    if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str) and entry[1] in DTYPES
            and isinstance(entry[2], list) and len(entry[2]) <= _MAX_DIMS
            and all(type(n) is int and 0 <= n <= MAX_FRAME_BYTES for n in entry[2])):
        raise ValueError(f"an array entry {str(entry)[:80]} is not [name, one of {sorted(DTYPES)}, shape]")
    return entry[0], DTYPES[entry[1]], tuple(entry[2])


@dataclass
class Stopped:
    """Why frames stopped before ``stop``: a torn or malformed frame, or (``at_stop``) one reaching past it."""

    reason: str
    at_stop: bool = False


def iter_frames(fd: int, start: int, stop: int) -> Iterator[Frame | Stopped]:
    """The frames from ``start`` up to the byte ``stop``, each checked; ends with ``Stopped`` when it meets a
    frame that is torn, malformed or reaches past ``stop``."""
    offset = start
    torn = "a torn frame at byte {:,} (a write cut short) is ignored"
    while offset < stop:
        head = os.pread(fd, FRAME_HEAD.size, offset)
        if len(head) < FRAME_HEAD.size:
            yield Stopped(torn.format(offset), at_stop=True)
            return
        length, crc = FRAME_HEAD.unpack(head)
        if length > MAX_FRAME_BYTES:
            yield Stopped(f"the frame at byte {offset:,} claims {length:,} bytes, over the limit of "
                          f"{MAX_FRAME_BYTES:,}")
            return
        end = offset + FRAME_HEAD.size + length
        if end > stop:
            yield Stopped(torn.format(offset), at_stop=True)
            return
        payload = os.pread(fd, length, offset + FRAME_HEAD.size)
        if len(payload) < length or zlib.crc32(payload) != crc:
            yield Stopped(torn.format(offset))
            return
        try:
            yield decode_payload(payload, end)
        except ValueError as exc:
            yield Stopped(f"the frame at byte {offset:,} is malformed: {exc}")
            return
        offset = end


def read_frames(path: str, start: int = len(MAGIC), max_bytes: int = MAX_READ_BYTES) -> FrameRead:
    """The complete frames of ``path`` from byte ``start`` (a previous read's ``end``, to read only what a live
    run appended since), reading at most ``max_bytes``. ``MonitorFileError`` when the file is not a monitor file
    (a link, a FIFO, another magic); ``FileNotFoundError`` when absent."""
    fd = open_regular(path, "training monitor file")
    try:
        if not _started(fd, f"{path} does not start as a Lantern training monitor file; remove it"):
            return FrameRead()
        size = os.fstat(fd).st_size
        stop = min(size, start + max_bytes)
        read = FrameRead(end=start)
        for item in iter_frames(fd, start, stop):
            if isinstance(item, Stopped):
                read.problem = item.reason
                if item.at_stop and stop < size:
                    read.problem = f"only the first {max_bytes / 2**20:,.1f} MB of {path} were read (it holds " \
                                   f"{size / 2**20:,.1f} MB)"
                break
            read.frames.append(item)
            read.end = item.end
        return read
    finally:
        os.close(fd)


def _started(fd: int, foreign: str) -> bool:
    """Whether the file holds the whole magic; False for a file cut within it (a kill while it was created: 0
    to 7 bytes of it), which holds no frame yet; ``MonitorFileError(foreign)`` for any other start."""
    head = os.pread(fd, len(MAGIC), 0)
    if head == MAGIC:
        return True
    if MAGIC.startswith(head):
        return False
    raise MonitorFileError(foreign)


class MonitorFileWriter:
    """Appends frames to one monitor file; opening an existing one keeps its frames while ``keep(frame)`` holds
    and cuts the file after them (a torn frame, and those of an epoch a killed run did not finish)."""

    def __init__(self, path: str, keep: Callable[[Frame], bool]) -> None:
        self.path = path
        created = not os.path.exists(path)
        self.kept = [] if created else self._kept_frames(keep)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        if created or os.fstat(self._fd).st_size == 0:
            os.write(self._fd, MAGIC)
            self.sync(folder=True)

    def _kept_frames(self, keep: Callable[[Frame], bool]) -> list[Frame]:
        """The frames to keep; the file is truncated after them (to the magic alone when none is kept)."""
        fd = open_regular(self.path, "training monitor file")
        try:
            kept: list[Frame] = []
            started = _started(fd, f"{self.path} is not a Lantern training monitor file; move it out of the work "
                                   "dir (the monitor writes its own there)")
            end = len(MAGIC) if started else 0  # a file cut within its magic is started anew
            for item in iter_frames(fd, end, os.fstat(fd).st_size) if started else ():
                if isinstance(item, Stopped) or not keep(item):
                    break
                kept.append(item)
                end = item.end
        finally:
            os.close(fd)
        os.truncate(self.path, end)
        return kept

    def append(self, fields: dict[str, Any], arrays: Optional[dict[str, np.ndarray]] = None) -> None:
        frame = encode_frame(fields, arrays)
        written = os.write(self._fd, frame)  # one write: a kill leaves it whole or torn, never interleaved
        if written != len(frame):  # a full disk: cut the partial frame off so later frames stay readable
            os.ftruncate(self._fd, os.fstat(self._fd).st_size - written)
            raise OSError(f"only {written} of {len(frame)} bytes of a frame could be written to {self.path}")

    def sync(self, folder: bool = False) -> None:
        os.fsync(self._fd)
        if folder:
            dir_fd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def close(self) -> None:
        if self._fd >= 0:
            self.sync()
            os.close(self._fd)
            self._fd = -1
