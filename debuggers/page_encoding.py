"""Encoding a page's records (``debuggers.page_format``) as pickle opcodes and JSON headers, fast.

``RecordEncoder`` walks a page value and emits its opcodes, passing array bytes by
reference (they go to disk with ``writev``, never copied), and returns the
record's JSON header. Walking every record this way costs tens of microseconds of
Python per datapoint, which dominates a page of many small arrays.

Records of one batch nearly always share their structure: the same keys, the same
dtypes and shapes, only the array bytes and a few numbers differ. So a record is
encoded from a *plan*: its structure is encoded once (arrays, floats and ints left
as slots) and cached under the record's *signature* (keys, strings, dtypes and
shapes); each record then costs one short walk for its signature, a few joins and
one ``%`` format of the header. The bytes are the same as the walk's.

A whole batch of records of one plan costs less still (``RecordEncoder.records``):
with every int opcode 5 bytes wide (``J``) and every number in a header padded
with spaces to a fixed width (JSON allows them), all records of a plan have one
length, and the only bytes that differ between them are the idx, the numbers and
the offsets. So the batch's bytes, less its arrays, are one template repeated
with those fields patched in by NumPy (``_BatchLayout``), checked against the
plan column by column (``_columns``) rather than record by record.
"""

from __future__ import annotations

import functools
import json
import math
import pickle
import struct
from collections.abc import Hashable
from typing import Any

import numpy as np

from debuggers.page_values import UnsupportedOutputError

_FROMBUFFER = b"cnumpy._core.numeric\n_frombuffer\n"
_DTYPE = b"cnumpy\ndtype\n"
_COMPLEX = b"cbuiltins\ncomplex\n"
U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_DOUBLE = struct.Struct(">d")
HEADER_OPCODE_BYTES = 5  # b'X' <u32 length> before each header
_HEADER_TAIL = b"0s"  # POP the header, SETITEM page[idx] = outputs
_json_str = json.encoder.encode_basestring_ascii
_SLOT = "\x00"  # marks a slot in a plan's header text (JSON escapes every \x00 of real text)
_FLOAT_BYTES = 1 + _DOUBLE.size
_INT32_BYTES = 1 + _I32.size  # every int in int32's range is J <i4
_MAX_PLANS = 256
# Numbers in a header are padded with spaces to these widths, so a plan's header has one length.
_OFFSET_WIDTH = 12  # an array's offset: pages up to 1 TB
_FLOAT_WIDTH = 24  # the longest float repr, '-2.2250738585072014e-308'
_INT_WIDTH = 11  # the longest int32, '-2147483648'
_TEXT_FORMATS = {np.ndarray: f"%{_OFFSET_WIDTH}d", float: f"%-{_FLOAT_WIDTH}s", int: f"%-{_INT_WIDTH}s"}
MIN_BATCH_RECORDS = 8  # fewer records are encoded one by one: NumPy's per-call cost would exceed the gain


class RecordEncoder:
    """Records as pickle opcodes: small opcodes gathered in one buffer, array bytes passed by reference."""

    def __init__(self, start: int) -> None:
        self.buffers: list[Any] = []
        self.small = bytearray()
        self.flushed = start  # file offset where ``small`` begins

    @property
    def position(self) -> int:
        return self.flushed + len(self.small)

    def record(self, idx: int, value: Any) -> tuple[int, int, int]:
        """Encode ``page[idx] = value`` and its header; returns (record start, header offset, header length)."""
        start = self.position
        leaves: list[Any] = []
        try:
            signature = _signature(value, leaves)
        except _NoPlan:
            self.int(idx)
            header, length = self.header(self.value(value))
            return start, header, length
        header, length = _plan(signature, value).emit(self, idx, leaves)
        return start, header, length

    def records(self, indices: list[int], values: list[Any], limit: int | None,
                ) -> tuple[np.ndarray, np.ndarray, int] | None:
        """Encode a batch of records of one plan at once: the first records until the position reaches
        ``limit`` (all of them when None). Returns their starts, header offsets and header length; None
        (nothing encoded) unless the values share one plan and their numbers fit the batch layout."""
        leaves: list[list[Any]] = []
        signature = _columns(values, leaves)
        if signature is None:
            return None
        return _plan(signature, values[0]).batch_layout().emit(self, indices, leaves, limit)

    def raw(self, data: Any, nbytes: int) -> int:
        """Append ``data`` (a buffer of ``nbytes``) without copying it; returns its file offset."""
        offset = self.position
        self.buffers += (self.small, data)
        self.flushed = offset + nbytes
        self.small = bytearray()
        return offset

    def int(self, value: int) -> None:
        self.small += int_opcode(value)

    def str(self, value: str) -> None:
        data = value.encode("utf-8", "surrogatepass")
        self.small += (b"\x8c" + bytes((len(data),)) if len(data) < 256 else b"X" + _U32.pack(len(data))) + data

    def integer(self, value: int) -> str:
        self.int(value)
        return int.__repr__(value).ljust(_INT_WIDTH)

    def float(self, value: float) -> str:
        self.small += b"G" + _DOUBLE.pack(value)
        return _json_float(value).ljust(_FLOAT_WIDTH)

    def key(self, key: Any) -> str:
        """A dict key: part of a record's structure, never a plan's slot."""
        if type(key) is str:
            self.str(key)
            return _json_str(key)
        return RecordEncoder.integer(self, key) if type(key) is int else self.value(key)

    def value(self, value: Any) -> str:
        """Opcodes that rebuild ``value``; returns its description as JSON text (see ``page_format``)."""
        kind = type(value)
        if kind is np.ndarray:
            return self.array(value)
        if kind is dict:
            self.small += b"}(" if value else b"}"
            pairs = ",".join([f"[{self.key(key)},{self.value(item)}]" for key, item in value.items()])
            self.small += b"u" if value else b""
            return f'{{"d":[{pairs}]}}'
        if kind is str:
            self.str(value)
            return _json_str(value)
        if kind is int:
            return self.integer(value)
        if kind is float:
            return self.float(value)
        if value is None:
            self.small += b"N"
            return "null"
        if kind is bool:
            self.small += b"\x88" if value else b"\x89"
            return "true" if value else "false"
        if kind is list:
            self.small += b"](" if value else b"]"
            items = ",".join([self.value(item) for item in value])
            self.small += b"e" if value else b""
            return f"[{items}]"
        if kind is tuple:
            self.small += b"("
            items = ",".join([self.value(item) for item in value])
            self.small += b"t"
            return f'{{"t":[{items}]}}'
        if kind is bytes:
            self.small += b"\x8e" + U64.pack(len(value))
            return f'{{"b":[{self.raw(value, len(value))},{len(value)}]}}'
        if kind is complex:
            self.small += _COMPLEX + b"G" + _DOUBLE.pack(value.real) + b"G" + _DOUBLE.pack(value.imag) + b"\x86R"
            return f'{{"c":[{_json_float(value.real)},{_json_float(value.imag)}]}}'
        raise UnsupportedOutputError(f"a {kind.__name__} is not a page value: convert outputs with "
                                     "debuggers.page_values.to_page_value first")

    def array(self, array: np.ndarray) -> str:
        if not array.flags.c_contiguous:  # converted values are; ascontiguousarray would make a 0-d array 1-d
            array = np.ascontiguousarray(array)
        self.small += _FROMBUFFER + b"(\x96" + U64.pack(array.nbytes)
        offset = self.raw(array, array.nbytes)
        opcodes, description = _array_tail(array.dtype.str, array.shape)
        self.small += opcodes
        return f'{{"a":[{offset:{_OFFSET_WIDTH}d},{description}]}}'

    def header(self, text: str) -> tuple[int, int]:
        """Close a record with its JSON header; returns the header's offset and length."""
        header = text.encode()
        self.small += b"X" + _U32.pack(len(header))
        offset = self.position
        self.small += header + _HEADER_TAIL
        return offset, len(header)

    def take(self) -> list[Any]:
        """Everything encoded since the last ``take``, as buffers to write."""
        buffers = self.buffers + [self.small]
        self.flushed = self.position
        self.buffers, self.small = [], bytearray()
        return buffers


class _TemplateEncoder(RecordEncoder):
    """Encodes a record's structure with its arrays, floats and ints left as slots (``_RecordPlan``)."""

    def __init__(self) -> None:
        super().__init__(0)
        self.kinds: list[type] = []  # per slot: np.ndarray, float or int
        self.array_offsets: list[int] = []  # per slot: an array's offset in the body, had every int 0 bytes
        self.slot_bytes: list[int] = []  # per slot: its bytes (an int's: 0)

    def slot(self, kind: type, nbytes: int) -> str:
        self.kinds.append(kind)
        self.slot_bytes.append(nbytes)
        self.array_offsets.append(self.position)
        self.flushed = self.position + nbytes
        self.buffers.append(bytes(self.small))
        self.small = bytearray()
        return _SLOT

    def array(self, array: np.ndarray) -> str:
        self.small += _FROMBUFFER + b"(\x96" + U64.pack(array.nbytes)
        text = self.slot(np.ndarray, array.nbytes)
        opcodes, description = _array_tail(array.dtype.str, array.shape)
        self.small += opcodes
        return f'{{"a":[{text},{description}]}}'

    def float(self, value: float) -> str:
        return self.slot(float, _FLOAT_BYTES)

    def integer(self, value: int) -> str:
        return self.slot(int, 0)  # its opcode's length varies: emit shifts what follows


class _RecordPlan:
    """The encoding of every record with one signature: constant opcodes between slots, a header template."""

    def __init__(self, value: Any) -> None:
        encoder = _TemplateEncoder()
        text = encoder.value(value)
        pieces = encoder.buffers + [bytes(encoder.small)]  # opcodes before, between and after the slots
        self.pieces: list[Any] = [None] * (2 * len(pieces) - 1)
        self.pieces[::2] = pieces
        self.kinds, self.array_offsets, self.slot_bytes = encoder.kinds, encoder.array_offsets, encoder.slot_bytes
        self.arrays_only = all(kind is np.ndarray for kind in self.kinds)
        self.body_bytes = encoder.position
        self.header_parts = text.split(_SLOT)  # the header's text before, between and after the slots
        self.header = self.header_parts[0].replace("%", "%%") + "".join(
            _TEXT_FORMATS[kind] + part.replace("%", "%%") for kind, part in zip(self.kinds, self.header_parts[1:]))
        self._batch_layout: _BatchLayout | None = None

    def batch_layout(self) -> _BatchLayout:
        if self._batch_layout is None:
            self._batch_layout = _BatchLayout(self)
        return self._batch_layout

    def emit(self, encoder: RecordEncoder, idx: int, leaves: list[Any]) -> tuple[int, int]:
        """Append the record of ``leaves`` (the slots' arrays, floats and ints) to ``encoder``; returns the
        header's offset and length."""
        idx_opcode = int_opcode(idx)
        body = encoder.position + len(idx_opcode)
        out = self.pieces[:]  # opcodes between the slots; the slots' bytes go in between
        if self.arrays_only:
            out[1::2] = leaves
            texts: list[Any] = [body + offset for offset in self.array_offsets]
            shift = 0
        else:
            out[1::2], texts, shift = self._slots(body, leaves)
        header = (self.header % tuple(texts)).encode()
        small = encoder.small
        small += idx_opcode
        small += out[0]
        out[0] = small
        encoder.buffers += out
        encoder.flushed = body + self.body_bytes + shift
        encoder.small = small = bytearray(b"X")
        small += _U32.pack(len(header))
        small += header
        small += _HEADER_TAIL
        return encoder.flushed + HEADER_OPCODE_BYTES, len(header)

    def _slots(self, body: int, leaves: list[Any]) -> tuple[list[Any], list[Any], int]:
        """The slots' bytes and header texts, and how far the ints' opcodes shift the record's end."""
        parts, texts, shift = [], [], 0
        for leaf, kind, offset in zip(leaves, self.kinds, self.array_offsets):
            if kind is np.ndarray:
                parts.append(leaf)
                texts.append(body + offset + shift)
            elif kind is float:
                parts.append(b"G" + _DOUBLE.pack(leaf))
                texts.append(_json_float(leaf))
            else:
                opcode = int_opcode(leaf)
                parts.append(opcode)
                shift += len(opcode)
                texts.append(int.__repr__(leaf))
        return parts, texts, shift


_WIDTHS = {np.ndarray: _OFFSET_WIDTH, float: _FLOAT_WIDTH, int: _INT_WIDTH}
_POWERS = 10 ** np.arange(_OFFSET_WIDTH - 1, -1, -1, dtype=np.int64)
_MAX_OFFSET = 10**_OFFSET_WIDTH
_SPACE, _ZERO = ord(" "), ord("0")


class _BatchLayout:
    """A plan's records with every int opcode 5 bytes wide: one record's bytes less its arrays (the
    *template*, one length for all), where its arrays' bytes go (*cuts*), and the template positions of
    what differs between records: the idx, the numbers' opcodes, and the header texts of the numbers
    and of the arrays' offsets."""

    def __init__(self, plan: _RecordPlan) -> None:
        template = bytearray(b"J" + _I32.pack(0))
        self.kinds = plan.kinds
        self.cuts: list[int] = []
        array_starts, float_fields, int_fields = [], [], []
        array_bytes = 0
        for piece, kind, nbytes in zip(plan.pieces[::2], plan.kinds, plan.slot_bytes):
            template += piece
            if kind is np.ndarray:
                self.cuts.append(len(template))
                array_starts.append(len(template) + array_bytes)
                array_bytes += nbytes
            elif kind is float:
                float_fields += range(len(template) + 1, len(template) + _FLOAT_BYTES)
                template += b"G" + bytes(_DOUBLE.size)
            else:
                int_fields += range(len(template) + 1, len(template) + _INT32_BYTES)
                template += b"J" + bytes(_I32.size)
        template += plan.pieces[-1]
        self.header_length = sum(map(len, plan.header_parts)) + sum(_WIDTHS[kind] for kind in plan.kinds)
        template += b"X" + _U32.pack(self.header_length)
        self.header_offset = len(template) + array_bytes  # from the record's start: the arrays come first
        texts: dict[type, list[int]] = {np.ndarray: [], float: [], int: []}
        template += plan.header_parts[0].encode()
        for kind, part in zip(plan.kinds, plan.header_parts[1:]):
            texts[kind] += range(len(template), len(template) + _WIDTHS[kind])
            template += b" " * _WIDTHS[kind] + part.encode()
        template += _HEADER_TAIL
        self.template = np.frombuffer(bytes(template), np.uint8)
        self.record_bytes = len(template) + array_bytes
        self.array_starts = np.array(array_starts, np.int64)
        # patched in this order: idx, floats' opcodes and texts, ints' opcodes and texts, offsets' texts
        self.fields = np.array([*range(1, _INT32_BYTES), *float_fields, *texts[float], *int_fields, *texts[int],
                                *texts[np.ndarray]], np.intp)

    def emit(self, encoder: RecordEncoder, indices: list[int], leaves: list[list[Any]], limit: int | None,
             ) -> tuple[np.ndarray, np.ndarray, int] | None:
        """``RecordEncoder.records`` for this plan; None when an idx or int is outside int32's range (their
        opcodes would be wider) or the page would outgrow the offsets' width."""
        count, start = len(indices), encoder.position
        if limit is not None:
            count = min(count, max(1, -(-(limit - start) // self.record_bytes)))
        if start + count * self.record_bytes >= _MAX_OFFSET:
            return None
        floats = [column[:count] for column, kind in zip(leaves, self.kinds) if kind is float]
        ints = [column[:count] for column, kind in zip(leaves, self.kinds) if kind is int]
        if not all(-2**31 <= min(column) and max(column) < 2**31 for column in [indices[:count], *ints]):
            return None
        starts = start + self.record_bytes * np.arange(count, dtype=np.int64)
        idx = np.array(indices[:count], "<i4")
        patches = [idx.view(np.uint8).reshape(count, -1)]
        if floats:
            values = np.array(floats, ">f8").T.copy()
            patches += [values.view(np.uint8).reshape(count, -1), _float_texts(floats, values)]
        if ints:
            patches += [np.array(ints, "<i4").T.copy().view(np.uint8).reshape(count, -1),
                        _texts([list(map(int.__repr__, column)) for column in ints], _INT_WIDTH)]
        if len(self.array_starts):
            patches.append(_offset_texts(starts[:, None] + self.array_starts).reshape(count, -1))
        rows = np.empty((count, len(self.template)), np.uint8)
        rows[:] = self.template
        rows[:, self.fields] = np.concatenate(patches, axis=1)
        encoder.buffers.append(encoder.small)
        encoder.buffers += self._buffers(rows, [column for column, kind in zip(leaves, self.kinds)
                                                if kind is np.ndarray], count)
        encoder.small = bytearray()
        encoder.flushed = start + count * self.record_bytes
        return starts, starts + self.header_offset, self.header_length

    def _buffers(self, rows: np.ndarray, arrays: list[list[np.ndarray]], count: int) -> list[Any]:
        """The records' bytes to write: stretches of ``rows`` with each array in its place, by reference.

        The stretches are ``bytes`` (a copy of ``rows``, a few hundred bytes per record), not memoryviews:
        the garbage collector does not track them, so a batch does not set off collections of the heap."""
        data, width = rows.tobytes(), rows.shape[1]
        cuts = range(self.cuts[0], rows.size, width) if len(self.cuts) == 1 else \
            (row + cut for row in range(0, rows.size, width) for cut in self.cuts)
        bounds = [0, *cuts, rows.size]
        stretches = [data[low:high] for low, high in zip(bounds, bounds[1:])]
        if not arrays:
            return stretches
        in_order = arrays[0][:count] if len(arrays) == 1 else \
            [array for row in zip(*(column[:count] for column in arrays)) for array in row]
        out: list[Any] = [None] * (len(stretches) + len(in_order))
        out[::2], out[1::2] = stretches, in_order
        return out


def _texts(columns: list[list[str]], width: int) -> np.ndarray:
    """Texts (ASCII) padded with spaces to ``width``, as (count, columns * width) bytes, record by record."""
    text = np.ascontiguousarray(np.array(columns, f"S{width}").T)
    data = text.view(np.uint8).reshape(len(text), -1)
    data[data == 0] = _SPACE
    return data


def _float_texts(columns: list[list[float]], values: np.ndarray) -> np.ndarray:
    """``_texts`` of floats as JSON writes them (NaN, Infinity, -Infinity where repr says nan and inf)."""
    convert = float.__repr__ if np.isfinite(values).all() else _json_float
    return _texts([list(map(convert, column)) for column in columns], _FLOAT_WIDTH)


def _offset_texts(offsets: np.ndarray) -> np.ndarray:
    """Offsets (below ``_MAX_OFFSET``) as decimal text right-aligned in ``_OFFSET_WIDTH`` bytes each."""
    digits = offsets[..., None] // _POWERS
    text = (digits % 10 + _ZERO).astype(np.uint8)
    text[(digits == 0) & (_POWERS > 1)] = _SPACE
    return text


class _NoPlan(Exception):
    """A value encoded by the walk alone (bytes, complex, a non-contiguous array, an unsupported type)."""


def _signature(value: Any, leaves: list[Any]) -> Hashable:
    """What a plan is cached under (structure, keys, strings, dtypes, shapes); the slots' leaves, in order,
    go to ``leaves``."""
    kind = type(value)
    if kind is np.ndarray:
        if not value.flags.c_contiguous:
            raise _NoPlan
        leaves.append(value)
        return value.dtype, value.shape
    if kind is float or kind is int:
        leaves.append(value)
        return kind
    if kind is dict:
        return dict, tuple([(type(key), key, _signature(item, leaves)) for key, item in value.items()])
    if kind is list or kind is tuple:
        return kind, tuple([_signature(item, leaves) for item in value])
    if kind is str or kind is bool or value is None:
        return kind, value
    raise _NoPlan


def _columns(column: list[Any], leaves: list[list[Any]]) -> Hashable | None:
    """``_signature`` of all values of ``column`` at once, walked column by column (one list comprehension
    per node, not one walk per value); None unless every value has the same one. The slots' columns, in
    order, go to ``leaves``. (For one value, ``_signature``'s plain walk is four times faster.)"""
    first, count = column[0], len(column)
    kind = type(first)
    if list(map(type, column)).count(kind) != count:
        return None
    if kind is np.ndarray:
        if ([value.dtype for value in column].count(first.dtype) != count
                or [value.shape for value in column].count(first.shape) != count
                or not all([value.flags.c_contiguous for value in column])):
            return None
        leaves.append(column)
        return first.dtype, first.shape
    if kind is float or kind is int:
        leaves.append(column)
        return kind
    if kind is dict:
        return _dict_columns(column, leaves)
    if kind is list or kind is tuple:
        if list(map(len, column)).count(len(first)) != count:
            return None
        items = [_columns([value[i] for value in column], leaves) for i in range(len(first))]
        return None if None in items else (kind, tuple(items))
    if kind is str or kind is bool or first is None:
        return (kind, first) if column.count(first) == count else None
    return None


def _dict_columns(column: list[dict], leaves: list[list[Any]]) -> Hashable | None:
    """``_columns`` of dicts: the same keys, in the same order and of the same types."""
    keys = list(column[0])
    if list(map(len, column)).count(len(keys)) != len(column):
        return None
    if len(keys) > 1 and list(map(list, column)).count(keys) != len(column):
        return None
    if any(type(key) is not str for key in keys):  # 1 == True: compare the keys' types too
        types = [type(key) for key in keys]
        if any([type(key) for key in value] != types for value in column):
            return None
    items = []
    for key in keys:
        try:
            signature = _columns([value[key] for value in column], leaves)
        except KeyError:  # a single key of another name
            return None
        if signature is None:
            return None
        items.append((type(key), key, signature))
    return dict, tuple(items)


_PLANS: dict[Hashable, _RecordPlan] = {}


def _plan(signature: Hashable, value: Any) -> _RecordPlan:
    """The cached plan of records with ``signature`` (``value`` is one of them)."""
    plan = _PLANS.get(signature)
    if plan is None:
        plan = _RecordPlan(value)
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        _PLANS[signature] = plan
    return plan


def int_opcode(value: int) -> bytes:
    """``J <i4>`` for every int32, small ones too: the ints of one plan then take one width."""
    if -2**31 <= value < 2**31:
        return b"J" + _I32.pack(value)
    data = pickle.encode_long(value)
    return (b"\x8a" + bytes((len(data),)) if len(data) < 256 else b"\x8b" + _I32.pack(len(data))) + data


@functools.lru_cache(maxsize=1024)
def _array_tail(dtype: str, shape: tuple[int, ...]) -> tuple[bytes, str]:
    """What follows an array's bytes: ``numpy.dtype(dtype, False, True), shape, 'C'`` and REDUCE as opcodes,
    and the dtype and shape as JSON text."""
    data = dtype.encode()
    opcodes = _DTYPE + b"\x8c" + bytes((len(data),)) + data + b"\x89\x88\x87R(" \
        + b"".join(int_opcode(dim) for dim in shape) + b"t\x8c\x01CtR"
    return opcodes, f"{_json_str(dtype)},[{','.join(map(str, shape))}]"


def _json_float(value: float) -> str:
    """JSON text of a float as Python's json writes it (NaN and Infinity included)."""
    if math.isfinite(value):
        return float.__repr__(value)
    return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
