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
_MAX_PLANS = 256


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
        plan = _PLANS.get(signature)
        if plan is None:
            plan = _RecordPlan(value)
            if len(_PLANS) >= _MAX_PLANS:
                _PLANS.clear()
            _PLANS[signature] = plan
        header, length = plan.emit(self, idx, leaves)
        return start, header, length

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
        return int.__repr__(value)

    def float(self, value: float) -> str:
        self.small += b"G" + _DOUBLE.pack(value)
        return _json_float(value)

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
        return f'{{"a":[{offset},{description}]}}'

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

    def slot(self, kind: type, nbytes: int) -> str:
        self.kinds.append(kind)
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
        self.kinds, self.array_offsets = encoder.kinds, encoder.array_offsets
        self.arrays_only = all(kind is np.ndarray for kind in self.kinds)
        self.body_bytes = encoder.position
        self.header = "%s".join(part.replace("%", "%%") for part in text.split(_SLOT))

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


_PLANS: dict[Hashable, _RecordPlan] = {}


def int_opcode(value: int) -> bytes:
    if 0 <= value < 256:
        return b"K" + bytes((value,))
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
