"""What a debug page holds: debugger outputs converted to plain data and NumPy arrays.

``to_page_value`` turns one output (tensors, arrays, numbers, containers) into
the few types a page stores, naming the path of anything it cannot hold.
``held_storage`` says which memory a converted value keeps alive, so the page
writer's memory budget counts what is really held: a row of a batch array keeps
the whole batch array alive, and is counted once for all its rows.

Tensors are converted whole (one batch at a time, by ``debuggers.batch_split``),
never row by row: one ``.numpy()`` per batch instead of one per datapoint.

A page lists every number, string and container item of a datapoint's outputs in its record's
JSON header, which a reader parses whole: one output may hold ``MAX_OUTPUT_NODES`` of them
(``value_nodes``), as many as Python lists and dicts of outputs hold in practice; a bigger one
(a list of 500,000 numbers) is refused as it is converted, with the fix: an array or tensor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from debuggers.pages.batch_values import Rows
from debuggers.pages.value_rules import LEAF_TYPES, MAX_DEPTH, MAX_OUTPUT_NODES, UnsupportedOutputError, join_path

SMALL_VALUE_BYTES = 16  # what a number or an empty container is counted as
_WIDENED = {torch.bfloat16: torch.float32, torch.complex32: torch.complex64}
_NUMPY_FLOATS = (torch.float16, torch.float32, torch.float64)
# Subclasses (IntEnum, StrEnum, ...) are stored as their exact base type: a page holds data, not classes.
_EXACT: dict[type, Callable[[Any], Any]] = {
    bool: bool, int: int.__int__, float: float.__float__, complex: lambda z: complex(z.real, z.imag),
    str: str.__str__, bytes: lambda b: bytes(memoryview(b)),
}
_SUPPORTED = ("tensors, NumPy arrays, numbers, strings, bytes, None, or dicts (str/int keys), "
              "lists and tuples of these")
# A tensor view keeps its whole storage alive: copied when the storage is this much larger than the view.
_VIEW_SLACK_BYTES = 64 * 1024


def _unsupported(path: str, what: str, fix: str) -> UnsupportedOutputError:
    return UnsupportedOutputError(f"debug output at '{path or '<root>'}' {what}; {fix}")


def target_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a tensor is stored as: NumPy has no bfloat16, float8 or complex32."""
    if dtype in _WIDENED:
        return _WIDENED[dtype]
    if dtype.is_floating_point and dtype not in _NUMPY_FLOATS:
        return torch.float32
    return dtype


def tensor_to_array(tensor: torch.Tensor, path: str = "") -> np.ndarray:
    """A C-contiguous CPU array of ``tensor``; a copy when the tensor is a small view of a larger storage."""
    try:
        if type(tensor) is not torch.Tensor:
            tensor = tensor.as_subclass(torch.Tensor)  # a subclass's own __torch_function__ must not run here
        if tensor.layout != torch.strided or tensor.is_quantized or tensor.device.type == "meta":
            raise _unsupported(path, f"is a {tensor.layout} / {tensor.dtype} tensor on {tensor.device}",
                               "return a dense tensor instead (e.g. tensor.to_dense() or tensor.dequantize())")
        tensor = tensor.detach()
        dtype = target_dtype(tensor.dtype)
        if tensor.device.type != "cpu" or dtype != tensor.dtype or tensor.is_conj() or tensor.is_neg():
            tensor = tensor.to("cpu", dtype).resolve_conj().resolve_neg()
        array = tensor.numpy()
        held = tensor.untyped_storage().nbytes()
    except (TypeError, RuntimeError, NotImplementedError) as exc:
        if isinstance(exc, UnsupportedOutputError):
            raise
        raise _unsupported(path, f"is a {type(tensor).__name__} of dtype {tensor.dtype} that NumPy cannot hold "
                           f"({type(exc).__name__}: {exc})",
                           "convert it first, e.g. tensor.float() or tensor.to(torch.uint8)") from None
    if not array.flags.c_contiguous:
        return np.ascontiguousarray(array)
    return array.copy() if held > 2 * array.nbytes + _VIEW_SLACK_BYTES else array


def _ndarray_to_array(array: np.ndarray, path: str) -> np.ndarray:
    if array.dtype.hasobject:
        raise _unsupported(path, "is a NumPy array of Python objects",
                           "return a numeric array, or a list of strings/numbers")
    if array.dtype.fields is not None:
        raise _unsupported(path, f"is a structured NumPy array (dtype {array.dtype})",
                           "return one array per field, e.g. {name: value[name] for name in value.dtype.names}")
    if type(array) not in (np.ndarray, np.memmap):
        raise _unsupported(path, f"is a {type(array).__name__} (an ndarray subclass)",
                           "return np.asarray(value) or a tensor instead")
    if type(array) is np.memmap:
        return np.array(array, copy=True)  # its bytes may change on disk after capture
    return array if array.flags.c_contiguous else np.ascontiguousarray(array)


def _exact(obj: Any) -> Any:
    """``obj`` as its exact built-in leaf type (``obj`` itself when it already is one)."""
    for base, convert in _EXACT.items():
        if isinstance(obj, base):
            return obj if type(obj) is base else convert(obj)
    return obj


def page_key(key: Any, path: str) -> str | int:
    """A dict key as a page stores it (str or int)."""
    if isinstance(key, (str, int)):
        return _exact(key)
    if isinstance(key, np.integer):
        return int(key)
    raise _unsupported(path, f"has a dict key {key!r} of type {type(key).__name__}",
                       "dict keys must be str or int: convert the key with str(key)")


def to_page_value(obj: Any, path: str = "", max_nodes: int = MAX_OUTPUT_NODES) -> Any:
    """Convert one debugger output to what a page holds, of ``max_nodes`` header values at most (``value_nodes``).

    Raises ``UnsupportedOutputError`` naming the path inside the output (``'stats.hist[2]'``).
    """
    if type(obj) in (str, int, float, bool, type(None)):
        return obj
    return _convert(obj, path, 0, [max_nodes, max_nodes])


def check_value_nodes(value: Any, path: str, max_nodes: int = MAX_OUTPUT_NODES) -> None:
    """Refuse a page value (or batch value) whose record header would list more than ``max_nodes`` values."""
    if value_nodes(value, max_nodes) > max_nodes:
        raise _too_many_nodes(path, max_nodes)


def _too_many_nodes(path: str, max_nodes: int) -> UnsupportedOutputError:
    return _unsupported(path, f"holds too many numbers, strings and items in Python lists, tuples and dicts: a page "
                        f"lists each in the record's header, at most {max_nodes} for one output",
                        "return it as an array or tensor instead (e.g. np.asarray(values) or torch.tensor(values)), "
                        "or return less")


def _own_nodes(item: Any) -> int:
    """What a dict, list, tuple or array adds to its record header's count (``value_nodes``), its items apart."""
    if isinstance(item, dict):
        return 2 + 3 * len(item)  # {"d":[[key,value],...]}
    if isinstance(item, (list, tuple)):
        return 2 + len(item)  # [...] or {"t":[...]}
    return 5 + item.ndim  # {"a":[offset,dtype,[shape]]}


def _spend(budget: list[int], nodes: int, path: str) -> None:
    """Count ``nodes`` (``_own_nodes``) against ``budget`` ([header values left, the bound])."""
    budget[0] -= nodes
    if budget[0] < 0:
        raise _too_many_nodes(path, budget[1])


def _convert(obj: Any, path: str, _depth: int, budget: list[int]) -> Any:
    """``to_page_value``'s walk, counting the header values as it goes (``_spend``)."""
    if type(obj) in (str, int, float, bool, type(None)):
        return obj
    if _depth > MAX_DEPTH:
        raise _unsupported(path, f"is nested more than {MAX_DEPTH} levels deep (a reference cycle?)",
                           "return a flatter structure")
    if isinstance(obj, np.ndarray):
        _spend(budget, 5 + obj.ndim, path)
        return _ndarray_to_array(obj, path)
    if isinstance(obj, torch.Size):
        return [int(d) for d in obj]
    if isinstance(obj, torch.Tensor):
        if obj.dim() == 0:
            return _convert(obj.item(), path, _depth, budget)
        _spend(budget, 5 + obj.dim(), path)
        return tensor_to_array(obj, path)
    if isinstance(obj, np.generic):
        return _convert(obj.item(), path, _depth + 1, budget)
    if isinstance(obj, LEAF_TYPES):
        return _exact(obj)
    if isinstance(obj, dict):
        _spend(budget, 2 + 3 * len(obj), path)
        converted = {}
        for key, value in obj.items():
            key = page_key(key, path)
            converted[key] = _convert(value, join_path(path, key), _depth + 1, budget)
        return converted
    if isinstance(obj, (list, tuple)):
        _spend(budget, 2 + len(obj), path)
        values = [_convert(v, join_path(path, i), _depth + 1, budget) for i, v in enumerate(obj)]
        return values if isinstance(obj, list) else tuple(values)
    raise _unsupported(path, f"is a {type(obj).__module__}.{type(obj).__qualname__}, which a debug page cannot hold",
                       f"return {_SUPPORTED} (convert other objects first, e.g. str(obj) or torch.as_tensor(obj))")


def value_nodes(value: Any, limit: int) -> int:
    """About how many JSON values and containers the record header of a page value (or batch value: a datapoint's
    part of it) lists, as ``debuggers.pages.encoding.header_nodes`` counts them (its '[', '{' and ','; a string's
    or a number's own text adds none, bytes and complex numbers 3); the count stops once past ``limit``. Only
    plain dicts, lists and tuples are walked (a ``PerDatapoint`` list of a batch output is not one datapoint's)."""
    count, pending = 0, [value]
    while pending and count <= limit:
        item = pending.pop()
        kind = type(item)
        if kind is dict or kind is list or kind is tuple or kind is np.ndarray:
            count += _own_nodes(item)
            if count <= limit and kind is not np.ndarray:
                pending += item.values() if kind is dict else item
        elif kind is Rows:  # one entry per datapoint: the largest counts
            entries = item.entries
            if type(entries) is np.ndarray:
                count += _own_nodes(entries) - 1 if entries.ndim > 1 else 0  # a row of it
            else:
                count += max([value_nodes(entry, limit - count) for entry in entries], default=0)
        elif kind is bytes or kind is complex:  # {"b":[offset,n]}, {"c":[re,im]}
            count += 3
    return count


def _owner(array: np.ndarray) -> tuple[Any, int]:
    """The object whose memory ``array`` lives in, and that memory's size."""
    base: Any = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, np.ndarray):
        return base, base.nbytes
    if isinstance(base, torch.Tensor):
        return base, base.untyped_storage().nbytes()
    return base, array.nbytes


def held_storage(value: Any, owners: dict[int, tuple[Any, int]] | None = None) -> list[tuple[Any, int]]:
    """``(owner, nbytes)`` of every memory block a page value (or batch value) keeps alive (an owner may repeat).

    ``owners`` remembers the owner of each array's base across calls, so that the rows of one batch
    array are traced to their owner once per batch, not once per row."""
    owners = {} if owners is None else owners
    held, pending = [], [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is np.ndarray:
            base = item.base
            if base is None:
                held.append((item, item.nbytes))
                continue
            owner = owners.get(id(base))  # ``item`` keeps ``base`` alive: its id is not reused meanwhile
            if owner is None:
                owner = owners[id(base)] = _owner(item)
            held.append(owner)
        elif kind is Rows:
            pending.append(item.entries)  # a batch array, or a list of page values
        elif kind is dict:
            pending.extend(item.values())
        elif kind is list or kind is tuple:
            pending.extend(item)
        elif kind is str or kind is bytes:
            held.append((item, len(item) + SMALL_VALUE_BYTES))
    return held
