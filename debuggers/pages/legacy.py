"""Pages of Lantern's previous format (format 1): read them safely, with work bounded by the file's size.

A format-1 page is a protocol-5 pickle of ``{idx: {debugger_name: output}}`` from the
C pickler, listed in a version-1 ``index.json``. Reading one needs an unpickler, so
``load_legacy_page`` runs the C unpickler with a handful of NumPy constructors allowed,
each behind a guard that checks its arguments: it rebuilds only plain data and
non-object arrays, and a tampered page is refused before anything in it runs. A
container reached twice (a memo reference) is refused: Lantern never wrote one, and
a few hundred bytes of nested lists that double through memo references would
otherwise cost exponential time and memory to walk. Everything else the unpickler
builds costs at most a few objects per byte of the file.

``python -m debuggers.pages.convert DIR`` rewrites a format-1 folder in format 2.
"""

from __future__ import annotations

import math
import pickle
import struct
from collections.abc import Callable
from typing import Any, BinaryIO

import numpy as np
from numpy._core.multiarray import _reconstruct, scalar
from numpy._core.numeric import _frombuffer

from debuggers.pages.errors import CorruptPageError, UnsafePageError
from debuggers.pages.value_rules import LEAF_TYPES, MAX_DEPTH, join_path

LEGACY_INDEX_VERSION = 1


class _Refused(Exception):
    """Something in the file that a Lantern page never holds."""


class _Malformed(Exception):
    """The file is readable pickle but not a well-formed page."""


_NDARRAY = object()  # stands for numpy.ndarray: compared by identity, never callable or mutable


class _LoadingArray(np.ndarray):
    """Every array while its page loads: a BUILD on it reaches NumPy only with a checked state.

    ``load_page`` turns these into plain ndarrays once the file is read.
    """

    def __setstate__(self, state: Any) -> None:
        if not (type(state) is tuple and len(state) == 5 and isinstance(state[4], (bytes, bytearray))):
            raise _Malformed("an array state that is not (version, shape, dtype, fortran, raw bytes)")
        version, shape, dtype, fortran, data = state
        super().__setstate__((version, _check_shape(shape), _check_dtype(dtype), fortran is True, data))


class _Allowed:
    """An allowed global: callable, but with no ``__dict__``, ``__setstate__`` or settable
    attribute, so a BUILD instruction cannot rewire what later REDUCEs call."""

    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[..., Any]) -> None:
        object.__setattr__(self, "_fn", fn)

    def __setattr__(self, name: str, value: Any) -> None:
        raise _Refused("a BUILD instruction on an allowed global")

    def __call__(self, *args: Any) -> Any:
        return self._fn(*args)


def _check_dtype(dtype: Any) -> np.dtype:
    """NumPy's own dtype for ``dtype``'s description: BUILD may have set any flags or layout on the file's copy."""
    if not isinstance(dtype, np.dtype):
        raise _Malformed(f"an array dtype that is a {type(dtype).__name__}")
    if dtype.fields is not None or dtype.subdtype is not None:
        raise _Refused("a structured dtype")
    canonical = np.dtype(dtype.str)
    if dtype.hasobject or canonical.hasobject:
        raise _Refused(f"an array of Python objects (dtype {canonical}), "
                       "whose loading would unpickle arbitrary objects")
    return canonical


def _check_shape(shape: Any) -> tuple[int, ...]:
    if not (type(shape) is tuple and all(type(d) is int and d >= 0 for d in shape)):
        raise _Malformed(f"an array shape {shape!r}")
    return shape


def _check_order(order: Any, axis_order: tuple, ndim: int) -> None:
    """'C' or 'F'; NumPy 2.4 also writes 'K' and an axis permutation for permuted-contiguous arrays."""
    if order in ("C", "F") and not axis_order:
        return
    if order == "K" and len(axis_order) == 1 and type(axis_order[0]) is tuple \
            and sorted(axis_order[0]) == list(range(ndim)):
        return
    raise _Malformed(f"an array order {order!r} {axis_order!r}")


def _safe_frombuffer(buffer: Any, dtype: Any, shape: Any, order: Any, *axis_order: Any) -> np.ndarray:
    if not isinstance(buffer, (bytes, bytearray, pickle.PickleBuffer)):
        raise _Malformed(f"array data that is a {type(buffer).__name__}")
    dtype, shape = _check_dtype(dtype), _check_shape(shape)
    _check_order(order, axis_order, len(shape))
    nbytes = memoryview(buffer).nbytes
    if math.prod(shape) * dtype.itemsize != nbytes:
        raise _Malformed(f"{nbytes} bytes of data for an array of shape {shape} and dtype {dtype}")
    return _frombuffer(buffer, dtype, shape, order, *axis_order).view(_LoadingArray)


def _safe_dtype(obj: Any, align: Any = False, copy: Any = True) -> np.dtype:
    """Always a fresh copy: the BUILD that follows must not mutate NumPy's shared dtype singletons."""
    if not isinstance(obj, str):
        raise _Malformed(f"a dtype described by a {type(obj).__name__}")
    dtype = np.dtype(obj, align is True, True)
    _check_dtype(dtype)
    return dtype


def _safe_reconstruct(subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
    """The empty array that NumPy's old-style pickles (datetimes, non-contiguous arrays) then BUILD."""
    if subtype is not _NDARRAY:
        raise _Refused("an ndarray subclass")
    if type(shape) is not tuple or (shape, dtype) != ((0,), b"b"):
        raise _Malformed(f"an array placeholder of shape {shape!r}")
    return _reconstruct(_LoadingArray, (0,), b"b")


def _safe_scalar(dtype: Any, data: Any) -> Any:
    dtype = _check_dtype(dtype)
    if type(data) is not bytes or len(data) != dtype.itemsize:
        raise _Malformed(f"a {dtype} scalar that is not {dtype.itemsize} raw bytes")
    return scalar(dtype, data)


_ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy", "ndarray"): _NDARRAY,
    **{(module, "_frombuffer"): _Allowed(_safe_frombuffer) for module in ("numpy._core.numeric", "numpy.core.numeric")},
    ("numpy", "dtype"): _Allowed(_safe_dtype),
    **{(module, "_reconstruct"): _Allowed(_safe_reconstruct)
       for module in ("numpy._core.multiarray", "numpy.core.multiarray")},
    **{(module, "scalar"): _Allowed(_safe_scalar) for module in ("numpy._core.multiarray", "numpy.core.multiarray")},
    ("builtins", "complex"): _Allowed(complex),
}


class _PageUnpickler(pickle.Unpickler):
    """The C unpickler, resolving only the guarded globals above."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise _Refused(f"a reference to the global {module}.{name}") from None


def _check_loaded(obj: Any, path: str, seen: set[int], depth: int = 0) -> Any:
    """``obj`` with plain ndarrays; refuses what a crafted file could assemble (dtypes, memoryviews,
    cycles, containers shared through memo references), so the walk visits each object once."""
    if depth > MAX_DEPTH:
        raise _Malformed(f"data nested more than {MAX_DEPTH} levels deep at '{path}'")
    if type(obj) is _LoadingArray:
        return obj.view(np.ndarray)
    if isinstance(obj, (dict, list, tuple)) and obj:
        if id(obj) in seen:
            raise _Malformed(f"a container reached twice (a shared or cyclic reference) at '{path}'")
        seen.add(id(obj))
    if isinstance(obj, dict):
        for key, value in obj.items():
            if not isinstance(key, (str, int)):
                raise _Malformed(f"a dict key of type {type(key).__name__} at '{path}'")
            obj[key] = _check_loaded(value, join_path(path, key), seen, depth + 1)
        return obj
    if isinstance(obj, (list, tuple)):
        values = [_check_loaded(value, join_path(path, i), seen, depth + 1) for i, value in enumerate(obj)]
        return values if isinstance(obj, list) else tuple(values)
    if isinstance(obj, LEAF_TYPES) or (isinstance(obj, np.generic) and not obj.dtype.hasobject):
        return obj
    raise _Malformed(f"a {type(obj).__name__} at '{path}'")


# Everything the C unpickler or a guard raises on a truncated or garbled file.
_MALFORMED_ERRORS = (pickle.UnpicklingError, EOFError, ValueError, KeyError, IndexError, TypeError,
                     AttributeError, struct.error, OverflowError, MemoryError, _Malformed)


def load_legacy_page(file: BinaryIO, path: str) -> dict:
    """Load a format-1 page from ``file``, running nothing from it: only plain data and numeric arrays."""
    try:
        page = _check_loaded(_PageUnpickler(file).load(), "", set())
    except _Refused as exc:
        raise UnsafePageError(
            f"refused to load debug page {path}: it contains {exc}, which a Lantern page never holds. "
            "The file was not produced by Lantern or was tampered with; nothing from it was executed. "
            "Delete it, or regenerate it by rerunning the epoch.") from None
    except _MALFORMED_ERRORS as exc:
        raise CorruptPageError(f"debug page {path} is truncated or not a Lantern page ({type(exc).__name__}: "
                               f"{exc}); delete it and rerun the epoch to regenerate it") from exc
    if not isinstance(page, dict) or not all(type(k) is int and isinstance(v, dict) for k, v in page.items()):
        raise CorruptPageError(f"debug page {path} is not a Lantern page: expected {{datapoint_idx: outputs}}, "
                               f"got a {type(page).__name__}; delete it and rerun the epoch")
    return page
