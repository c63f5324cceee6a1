"""Encoding a page's records (``debuggers.pages.file_format``) as pickle opcodes and JSON headers, fast.

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

A whole batch of records of one plan costs less still (``RecordEncoder.records``,
``_BatchLayout``). The arrays of each slot go to disk as one *stretch*, one after the
other, before the batch's records, which refer to them by row: a record holds no array
bytes. Every int opcode is 5 bytes wide (``J``) and every number in a header is padded
with spaces to a fixed width (JSON allows them), so all records of a plan have one length,
and a record of row i is the same in every batch but for its idx, its numbers and its
stretches' offsets: the batch's records are a cached block with those fields patched in by
NumPy. The batch is checked against the plan column by column (``_columns``: one list
comprehension per node of the structure), or, given its batch value (the batch arrays
before the split, ``debuggers.pages.batch_values``), with one walk for the whole batch.

A header is bounded (``MAX_HEADER_BYTES``, ``MAX_HEADER_NODES``): its JSON is parsed whole, and a crafted header
of many tiny values (``[[],[],...]``) cost the reader 37 times its size in memory and seconds per MB. The
encoder refuses a record whose header would pass either bound (``HeaderTooLargeError``), so the reader, which
refuses them too, never meets one Lantern wrote; one output is bounded earlier, as it is converted
(``debuggers.pages.value_rules.MAX_OUTPUT_NODES``).
"""

from __future__ import annotations

import functools
import json
import math
import pickle
import re
import struct
import threading
from collections.abc import Hashable
from typing import Any

import numpy as np

from debuggers.pages.batch_values import Rows
from debuggers.pages.value_rules import MAX_OUTPUT_NODES, UnsupportedOutputError

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
# A record's header, at most (Lantern's own are a few KB): its bytes, and its JSON values and containers as
# ``header_nodes`` counts them; a record of four outputs of the most one output may hold fits.
MAX_HEADER_BYTES = 64 * 2**20
MAX_HEADER_NODES = 4 * MAX_OUTPUT_NODES
# A JSON string, or an unclosed one to the end: the match never fails once at a quote, so a crafted header of
# quotes whose string is never closed is read once, not again from each quote
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*(?:"|\\?\Z)', re.DOTALL)


class HeaderTooLargeError(UnsupportedOutputError):
    """A record's header would pass ``MAX_HEADER_BYTES`` or ``MAX_HEADER_NODES``: the reader would refuse it."""


def header_nodes(header: bytes) -> int:
    """At most how many JSON values and containers ``header`` holds: its ``[``, ``{`` and ``,`` bytes, those inside
    strings left out (looked for only when the plain count is over the bound: a string's commas are no values).
    Counted before parsing, at C speed."""
    count = header.count(b"[") + header.count(b"{") + header.count(b",")
    if count > MAX_HEADER_NODES:
        header = _JSON_STRING.sub(b'""', header)
        count = header.count(b"[") + header.count(b"{") + header.count(b",")
    return count


def check_header(nodes: int, nbytes: int, which: str) -> None:
    """Refuse the record of datapoint(s) ``which`` ('idx=3', 'idx=8..15') when its header is over a bound."""
    if nodes > MAX_HEADER_NODES or nbytes > MAX_HEADER_BYTES:
        raise HeaderTooLargeError(
            f"the outputs of datapoint {which} would need a record header of {nodes} JSON values and containers "
            f"({nbytes} bytes), over what a page's reader accepts ({MAX_HEADER_NODES} values, {MAX_HEADER_BYTES} "
            "bytes): its outputs hold too many numbers, strings or items in Python lists, tuples and dicts. "
            "Return big outputs as arrays or tensors (e.g. np.asarray(values) or torch.tensor(values)), not as "
            "Python containers")


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
            return (start, *self._walked_record(idx, value))
        header, length = _plan(signature, value).emit(self, idx, leaves)
        return start, header, length

    def _walked_record(self, idx: int, value: Any) -> tuple[int, int]:
        """``record`` by the walk alone; a record refused on the way leaves the encoder as it was."""
        small, kept, buffers, flushed = self.small, len(self.small), len(self.buffers), self.flushed
        try:
            self.int(idx)
            text = self.value(value)
            header = text.encode()
            check_header(header_nodes(header), len(header), f"idx={idx}")
        except BaseException:
            del small[kept:], self.buffers[buffers:]
            self.small, self.flushed = small, flushed
            raise
        return self.header(text)

    def records(self, indices: list[int], values: list[Any], limit: int | None, batch_value: Any = None,
                ) -> tuple[int, np.ndarray, int] | None:
        """Encode a batch of records of one plan at once (``_BatchLayout``): the first records until the
        position reaches ``limit`` (all of them when None). ``batch_value``, when given, is the same
        datapoints in column form (``debuggers.pages.batch_values``): one walk of it replaces one per datapoint.
        Returns the records' start (the batch's), their header offsets and header length; None (nothing
        encoded) unless the values share one plan and their numbers fit the batch layout."""
        leaves: list[Any] = []
        if batch_value is None:
            signature = _columns(values, leaves)
        else:
            try:
                signature = _batch_columns(batch_value, len(indices), leaves)
            except _NoPlan:
                signature = None
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
                                     "debuggers.pages.values.to_page_value first")

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
    """Encodes a record's structure with its arrays, floats and ints left out as slots (``_RecordPlan``)."""

    def __init__(self) -> None:
        super().__init__(0)
        self.kinds: list[type] = []  # per slot: np.ndarray, float or int
        self.arrays: list[tuple[str, tuple[int, ...], int]] = []  # per array slot: dtype, shape, bytes

    def slot(self, kind: type) -> str:
        """End the piece of opcodes before a slot; the slot's own opcodes depend on how it is written."""
        self.kinds.append(kind)
        self.buffers.append(bytes(self.small))
        self.small = bytearray()
        return _SLOT

    def array(self, array: np.ndarray) -> str:
        self.arrays.append((array.dtype.str, array.shape, array.nbytes))
        text = self.slot(np.ndarray)
        return f'{{"a":[{text},{_array_tail(array.dtype.str, array.shape)[1]}]}}'

    def float(self, value: float) -> str:
        return self.slot(float)

    def integer(self, value: int) -> str:
        return self.slot(int)


class _RecordPlan:
    """The encoding of every record with one signature: constant opcodes between slots, a header template."""

    def __init__(self, value: Any) -> None:
        encoder = _TemplateEncoder()
        text = encoder.value(value)
        self.structure = encoder.buffers + [bytes(encoder.small)]  # opcodes before, between and after the slots
        self.kinds, self.arrays = encoder.kinds, encoder.arrays
        self.arrays_only = all(kind is np.ndarray for kind in self.kinds)
        self._record_pieces()
        self.header_parts = text.split(_SLOT)  # the header's text before, between and after the slots
        self.header_nodes = header_nodes("".join(self.header_parts).encode())  # numbers hold no '[', '{' or ','
        self.header = self.header_parts[0].replace("%", "%%") + "".join(
            _TEXT_FORMATS[kind] + part.replace("%", "%%") for kind, part in zip(self.kinds, self.header_parts[1:]))
        self._batch_layout: _BatchLayout | None = None

    def _record_pieces(self) -> None:
        """A record on its own holds its arrays' bytes: ``_frombuffer(BYTEARRAY8 <bytes>, dtype, shape, 'C')``.
        Sets ``pieces`` (opcodes, with None where a slot's bytes go), each array's offset in the record's body
        had every int 0 bytes, and the body's length."""
        pieces = list(self.structure)
        arrays = iter(self.arrays)
        for slot, kind in enumerate(self.kinds):
            if kind is np.ndarray:
                dtype, shape, nbytes = next(arrays)
                pieces[slot] += _FROMBUFFER + b"(\x96" + U64.pack(nbytes)
                pieces[slot + 1] = _array_tail(dtype, shape)[0] + pieces[slot + 1]
        self.pieces: list[Any] = [None] * (2 * len(pieces) - 1)
        self.pieces[::2] = pieces
        self.array_offsets, position, arrays = [], 0, iter(self.arrays)
        for piece, kind in zip(pieces, self.kinds):
            position += len(piece)
            self.array_offsets.append(position)
            position += next(arrays)[2] if kind is np.ndarray else _FLOAT_BYTES if kind is float else 0
        self.body_bytes = position + len(pieces[-1])

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
        if self.header_nodes > MAX_HEADER_NODES or len(header) > MAX_HEADER_BYTES:
            check_header(self.header_nodes, len(header), f"idx={idx}")
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


_WIDTHS = {float: _FLOAT_WIDTH, int: _INT_WIDTH}
_MAX_OFFSET = 10**_OFFSET_WIDTH
_SPACE = ord(" ")
_ROW_WIDTH = 10  # a record's row in its batch's stretches (int32)
_NDARRAY = b"cnumpy\nndarray\n"
_STRETCH_HEAD = 1 + U64.size  # BYTEARRAY8 <u64 length>, before a stretch of one slot's arrays
_STRETCH_TAIL = 1 + _U32.size + 1  # LONG_BINPUT <u32 memo slot>, POP: after it
# A stretch's arrays start at a file offset equal to their address in memory modulo this: the kernel's copy
# into the page cache runs at half speed or less when source and destination are misaligned (AMD EPYC here).
_ALIGN = 64
# A stretch of DIRECT_MIN_BYTES or more that starts a block of DIRECT_ALIGN bytes in memory (a ``BufferPool``
# buffer) starts one in the file too, so that ``page_format`` can write it with O_DIRECT, bypassing the page cache.
# Smaller writes cost more CPU with O_DIRECT than through the page cache here (a 64 KiB row: about 0.1 ms).
DIRECT_ALIGN = 4096
DIRECT_MIN_BYTES = 2 * 1024 * 1024
_MAX_PAD = DIRECT_ALIGN + 2  # alignment padding before a stretch: bytes pushed and popped, 3 bytes or more
_MAX_BLOCKS = 8


class _BatchLayout:
    """A batch of a plan's records, with the arrays of each slot in one *stretch* before the records::

        for each array slot j:  [padding]  BYTEARRAY8 <u64 n> <slot j's arrays, record after record>
                                LONG_BINPUT j  POP
        the records, each:      J <idx> ... numpy.ndarray(shape, dtype, memo[j], <row * nbytes>) ...

    The arrays go to disk as they are, one after the other, each stretch starting at a file offset
    aligned as its arrays are in memory; the records hold none of their bytes. A record's header gives
    an array as ``{"r": [stretch offset, row, dtype, shape]}``: its bytes are at stretch + row x nbytes.
    So a record of row i is the same in every batch of the same size (the *block* of rows, cached) but for
    its idx, its numbers and the stretches' offsets: every int opcode is 5 bytes wide and every number in
    a header is padded with spaces, so all records have one length. Memo slot j is reused by every batch."""

    def __init__(self, plan: _RecordPlan) -> None:
        self.array_bytes = [nbytes for _, _, nbytes in plan.arrays]
        self.largest_array = max(self.array_bytes, default=0)
        template = bytearray(b"J" + _I32.pack(0))
        float_fields, int_fields, self.in_stretch = [], [], []
        for piece, kind in zip(plan.structure, plan.kinds):
            template += piece
            if kind is np.ndarray:
                dtype, shape, _ = plan.arrays[len(self.in_stretch)]
                template += _NDARRAY + b"(" + _shape_opcodes(shape) + _dtype_opcodes(dtype) + b"j" \
                    + _U32.pack(len(self.in_stretch)) + b"J"
                self.in_stretch.append(len(template))
                template += bytes(_I32.size) + b"tR"
            elif kind is float:
                float_fields += range(len(template) + 1, len(template) + _FLOAT_BYTES)
                template += b"G" + bytes(_DOUBLE.size)
            else:
                int_fields += range(len(template) + 1, len(template) + _INT32_BYTES)
                template += b"J" + bytes(_I32.size)
        template += plan.structure[-1]
        texts: dict[type, list[int]] = {float: [], int: []}
        self.stretch_texts: list[int] = []  # where each array's stretch offset goes; its row follows
        header = bytearray(plan.header_parts[0].encode())
        for kind, part in zip(plan.kinds, plan.header_parts[1:]):
            if kind is np.ndarray:
                header[-len(b'{"a":['):] = b'{"r":['
                self.stretch_texts.append(len(header))
                header += b" " * (_OFFSET_WIDTH + 1 + _ROW_WIDTH)
            else:
                texts[kind] += range(len(header), len(header) + _WIDTHS[kind])
                header += b" " * _WIDTHS[kind]
            header += part.encode()
        self.header_length = len(header)
        self.header_nodes = header_nodes(bytes(header))
        template += b"X" + _U32.pack(len(header))
        self.header_offset = len(template)  # from the record's start
        self.stretch_texts = [self.header_offset + at for at in self.stretch_texts]
        template += header + _HEADER_TAIL
        self.template = np.frombuffer(bytes(template), np.uint8)
        self.record_bytes = len(template) + sum(self.array_bytes)  # its arrays included
        self._numbers = np.array([*float_fields, *[self.header_offset + at for at in texts[float]], *int_fields,
                                  *[self.header_offset + at for at in texts[int]]], np.intp)
        self._blocks: dict[int, _Block] = {}
        slots = {kind: [slot for slot, of in enumerate(plan.kinds) if of is kind] for kind in (np.ndarray, float, int)}
        self._array_slots, self._float_slots, self._int_slots = slots[np.ndarray], slots[float], slots[int]
        self._number_slots = bool(self._float_slots or self._int_slots)
        self._stretch_bytes = len(self.array_bytes) * (_STRETCH_HEAD + _STRETCH_TAIL)
        self._memo_puts = [b"r" + _U32.pack(slot) + b"0" for slot in range(len(self.array_bytes))]  # LONG_BINPUT, POP
        self._lock = threading.Lock()

    def emit(self, encoder: RecordEncoder, indices: list[int], leaves: list[Any], limit: int | None,
             ) -> tuple[int, np.ndarray, int] | None:
        """``RecordEncoder.records`` for this plan; None when an idx or int is outside int32's range (their
        opcodes would be wider), a stretch would reach 2 GiB, or the page would outgrow the offsets' width."""
        count, start = len(indices), encoder.position
        if self.header_nodes > MAX_HEADER_NODES or self.header_length > MAX_HEADER_BYTES:
            check_header(self.header_nodes, self.header_length, f"idx={indices[0]}..{indices[-1]}")
        if limit is not None:
            count = min(count, max(1, -(-(limit - start - self._stretch_bytes) // self.record_bytes)))
        if start + self._stretch_bytes + len(self.array_bytes) * _MAX_PAD + count * self.record_bytes >= _MAX_OFFSET \
                or count * self.largest_array >= 2**31:
            return None
        with self._lock:  # plans are shared by every page writer's thread: one batch patches the block at a time
            block = self._block(count)
            try:  # NumPy refuses a Python int out of int32's range
                block.idx[:] = indices if count == len(indices) else indices[:count]
                ints = [leaves[slot][:count] for slot in self._int_slots]
                int_values = np.array(ints, "<i4") if ints else None
            except OverflowError:
                return None
            out, position, offsets = self._stretches(encoder, [leaves[slot][:count] for slot in self._array_slots],
                                                     count)
            for column, text in zip(block.stretches, offsets):
                column[:] = text
            if self._number_slots:
                floats = [leaves[slot][:count] for slot in self._float_slots]
                block.records[:, self._numbers] = np.concatenate(_number_patches(floats, ints, int_values), axis=1)
            out.append(block.records.tobytes())  # bytes, not a memoryview: the garbage collector does not track it
        encoder.buffers += out
        encoder.small = bytearray()
        encoder.flushed = position + block.records.size
        return start, block.headers + position, self.header_length

    def _stretches(self, encoder: RecordEncoder, arrays: list[Any], count: int,
                   ) -> tuple[list[Any], int, list[bytes]]:
        """The stretches' opcodes and arrays (by reference) to write, where the records will start, and each
        stretch's offset as header text."""
        out, small, position, offsets = [], encoder.small, encoder.position, []
        for slot, (column, nbytes) in enumerate(zip(arrays, self.array_bytes)):
            address = array_address(column if type(column) is np.ndarray else column[0]) if nbytes else 0
            align = DIRECT_ALIGN if count * nbytes >= DIRECT_MIN_BYTES and address % DIRECT_ALIGN == 0 else _ALIGN
            pad = (address - position - _STRETCH_HEAD) % align
            if 0 < pad < 3:
                pad += align
            small += _padding(pad)
            small += b"\x96" + U64.pack(count * nbytes)
            position += pad + _STRETCH_HEAD
            offsets.append(b"%*d" % (_OFFSET_WIDTH, position))
            out.append(small)
            if type(column) is np.ndarray:
                out.append(column)
            else:
                out += column
            small = bytearray(self._memo_puts[slot])
            position += count * nbytes + _STRETCH_TAIL
        out.append(small)
        return out, position, offsets

    def _block(self, count: int) -> _Block:
        cached = self._blocks.get(count)
        if cached is None:
            if len(self._blocks) >= _MAX_BLOCKS:
                self._blocks.clear()
            cached = self._blocks[count] = _Block(self, count)
        return cached


class _Block:
    """The records of rows 0 .. count-1 of a batch layout, patched in place batch after batch: only their idx,
    their stretches' offsets and their numbers differ from one batch to the next (``idx`` and ``stretches``:
    views of those fields, one item per record). Shared by every thread that writes pages: patched and copied
    out under its layout's lock."""

    def __init__(self, layout: _BatchLayout, count: int) -> None:
        width = len(layout.template)
        self.records = np.empty((count, width), np.uint8)
        self.records[:] = layout.template
        rows = np.arange(count, dtype=np.int64)
        row_texts = _texts([list(map(str, range(count)))], _ROW_WIDTH)
        for at, text, nbytes in zip(layout.in_stretch, layout.stretch_texts, layout.array_bytes):
            self.records[:, at:at + _I32.size] = (rows * nbytes).astype("<i4")[:, None].view(np.uint8)
            self.records[:, text + _OFFSET_WIDTH] = ord(",")
            self.records[:, text + _OFFSET_WIDTH + 1:text + _OFFSET_WIDTH + 1 + _ROW_WIDTH] = row_texts
        self.idx = self._field("<i4", 1)  # J <i4>: each record's first opcode
        self.stretches = [self._field(f"S{_OFFSET_WIDTH}", at) for at in layout.stretch_texts]
        self.headers = rows * width + layout.header_offset  # from the first record's start

    def _field(self, dtype: str, at: int) -> np.ndarray:
        return np.ndarray((len(self.records),), dtype, self.records, at, (self.records.shape[1],))


def _number_patches(floats: list[list[float]], ints: list[list[int]], int_values: np.ndarray) -> list[np.ndarray]:
    """The numbers' opcodes and header texts, as (count, bytes) columns in ``_BatchLayout._numbers``' order
    (``int_values``: ``ints`` as an array of int32)."""
    count, patches = len((floats or ints)[0]), []
    if floats:
        values = np.array(floats, ">f8").T.copy()
        patches += [values.view(np.uint8).reshape(count, -1), _float_texts(floats, values)]
    if ints:
        patches += [int_values.T.copy().view(np.uint8).reshape(count, -1),
                    _texts([list(map(int.__repr__, column)) for column in ints], _INT_WIDTH)]
    return patches


def _padding(pad: int) -> bytes:
    """``pad`` bytes (0, or 3 or more) of opcodes that push bytes and pop them: SHORT_BINBYTES, or BINBYTES."""
    if pad == 0:
        return b""
    if pad <= 3 + 255:
        return b"C" + bytes((pad - 3,)) + bytes(pad - 3) + b"0"
    return b"B" + _U32.pack(pad - 6) + bytes(pad - 6) + b"0"


def array_address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


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


def outline_groups(values: list[Any]) -> tuple[list[list[int]], int]:
    """The positions of ``values`` grouped by their outline, in the order of their first datapoint, and the
    bytes of the arrays the outlines saw.

    An outline is a cheap stand-in for ``_signature`` (whose full walk of a record of many debuggers' outputs
    costs about as much as encoding it alone): the types of a dict's items and of its dicts' items, two levels,
    which is where one datapoint's outputs differ from another's (a part only some have). Values of one outline
    may still differ deeper: ``RecordEncoder.records`` checks them."""
    groups: dict[Hashable, list[int]] = {}
    array_bytes = 0
    for position, value in enumerate(values):
        outline: Hashable = type(value)
        if outline is dict:
            items = []
            for key, item in value.items():
                if type(item) is dict:
                    array_bytes += sum([part.nbytes for part in item.values() if type(part) is np.ndarray])
                    item = tuple([(name, type(part)) for name, part in item.items()])
                elif type(item) is np.ndarray:
                    array_bytes += item.nbytes
                    item = np.ndarray
                else:
                    item = type(item)
                items.append((key, item))
            outline = tuple(items)
        groups.setdefault(outline, []).append(position)
    return list(groups.values()), array_bytes


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


def _batch_columns(value: Any, count: int, leaves: list[Any]) -> Hashable:
    """``_columns`` of the ``count`` datapoints of a batch value (``debuggers.pages.batch_values``), from one walk
    of it: a batch array is the column of its slot as it is. Raises ``_NoPlan`` where they have no one plan."""
    kind = type(value)
    if kind is Rows:
        entries = value.entries
        if type(entries) is np.ndarray and entries.ndim > 1:
            if not entries.flags.c_contiguous:  # split values never are; its rows go to disk as one buffer
                raise _NoPlan
            leaves.append(entries)
            return entries.dtype, entries.shape[1:]
        if type(entries) is np.ndarray and entries.dtype.kind in "fiu":
            leaves.append(entries.tolist())
            return float if entries.dtype.kind == "f" else int
        signature = _columns(entries if type(entries) is list else entries.tolist(), leaves)
        if signature is None:
            raise _NoPlan
        return signature
    if kind is dict:
        return dict, tuple([(type(key), key, _batch_columns(item, count, leaves)) for key, item in value.items()])
    if kind is list or kind is tuple:
        return kind, tuple([_batch_columns(item, count, leaves) for item in value])
    shared: list[Any] = []  # a value every datapoint has
    signature = _signature(value, shared)
    leaves += [[leaf] * count for leaf in shared]
    return signature


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
    opcodes = _dtype_opcodes(dtype) + _shape_opcodes(shape) + b"\x8c\x01CtR"
    return opcodes, f"{_json_str(dtype)},[{','.join(map(str, shape))}]"


def _dtype_opcodes(dtype: str) -> bytes:
    """``numpy.dtype(dtype, False, True)`` as opcodes."""
    data = dtype.encode()
    return _DTYPE + b"\x8c" + bytes((len(data),)) + data + b"\x89\x88\x87R"


def _shape_opcodes(shape: tuple[int, ...]) -> bytes:
    return b"(" + b"".join(int_opcode(dim) for dim in shape) + b"t"


def _json_float(value: float) -> str:
    """JSON text of a float as Python's json writes it (NaN and Infinity included)."""
    if math.isfinite(value):
        return float.__repr__(value)
    return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
