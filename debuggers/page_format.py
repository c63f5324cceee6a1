"""On-disk format of debug pages, shared by the page writer and the viewer.

A page is a pickle file ``page_{n}.pkl`` (``page_rank{r}_{n}.pkl`` when several
ranks write into one folder) holding ``{datapoint_idx: {debugger_name: output}}``.
``index.json`` (``index_rank{r}.json``) maps every idx to its page, so a reader
opens one page per datapoint instead of all of them.

Why the care:

* Pages are written under a hidden temporary name and renamed: a page on disk is
  complete or absent, even after SIGKILL, and ``PAGE_GLOB`` never matches a
  temporary file. (No fsync: the target is a killed process, not a power cut,
  and fsync would make page writes slower than the ``numpy.save`` baseline.)
* Pages are plain protocol-5 pickles from the C pickler: NumPy reduces each contiguous
  array to ``_frombuffer(PickleBuffer, dtype, shape, order)``, whose bytes go to the file
  straight from memory with no Python code per array, so even a page of thousands of
  small arrays is written about as fast as ``numpy.save`` (joblib's pure-Python pickler
  spent ~200 us per array). ``pickle.load`` and ``joblib.load`` read them too.
* Outputs are converted to plain Python data and NumPy arrays whose sizes are
  their real byte counts, so pages split at the configured size.
* ``load_page`` runs the C unpickler with a handful of NumPy constructors allowed, each
  behind a guard that checks its arguments: it rebuilds only plain data and non-object
  arrays, and a page from elsewhere or a tampered one is refused before anything in it runs.
"""

from __future__ import annotations

import json
import math
import pickle
import re
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from utils.atomic_files import TEMP_MARKER, atomic_write, write_json_file

try:  # NumPy >= 2
    from numpy._core.multiarray import _reconstruct, scalar
    from numpy._core.numeric import _frombuffer
except ImportError:  # pragma: no cover - NumPy 1.x
    from numpy.core.multiarray import _reconstruct, scalar
    from numpy.core.numeric import _frombuffer

PAGE_GLOB = "page_*.pkl"
INDEX_GLOB = "index*.json"
INDEX_VERSION = 1
MAX_DEPTH = 64  # deeper outputs are almost certainly reference cycles

_CONTAINER_BYTES = 16  # rough per-container cost; arrays dominate real pages
_ARRAY_HEADER_BYTES = 128  # a pickled array's _frombuffer call: dtype, shape, order
_SCALAR_BYTES = 8
_WIDENED = {torch.bfloat16: torch.float32, torch.complex32: torch.complex64}
_NUMPY_FLOATS = (torch.float16, torch.float32, torch.float64)
_LEAF_TYPES = (str, bytes, int, float, bool, complex, type(None))
# Subclasses (IntEnum, StrEnum, ...) would be pickled as references to their class, which
# load_page refuses: they are stored as their exact base type.
_EXACT: dict[type, Callable[[Any], Any]] = {
    bool: bool, int: int.__int__, float: float.__float__, complex: lambda z: complex(z.real, z.imag),
    str: str.__str__, bytes: lambda b: bytes(memoryview(b)),
}
_SUPPORTED = ("tensors, NumPy arrays, numbers, strings, bytes, None, or dicts (str/int keys), "
              "lists and tuples of these")


class UnsupportedOutputError(TypeError):
    """A debugger returned something a page cannot hold."""


class PageWriteError(RuntimeError):
    """A page or index could not be written; ``path`` and ``errno`` say where and why."""

    def __init__(self, message: str, path: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.errno = errno


class UnsafePageError(ValueError):
    """A page holds something Lantern never writes; nothing from it was executed."""


class CorruptPageError(ValueError):
    """A page or index is truncated or is not in Lantern's format."""


# ------------------------------------------------------------------ names
def page_file_name(rank: int, world_size: int, page_number: int) -> str:
    return f"page_{page_number}.pkl" if world_size == 1 else f"page_rank{rank}_{page_number}.pkl"


def index_file_name(rank: int, world_size: int) -> str:
    return "index.json" if world_size == 1 else f"index_rank{rank}.json"


def is_own_file(name: str, rank: int, world_size: int) -> bool:
    """True for a page, index or temporary file that this rank writes (and may delete)."""
    base = r"page_\d+\.pkl|index\.json" if world_size == 1 else rf"page_rank{rank}_\d+\.pkl|index_rank{rank}\.json"
    temp = rf"\.(?:{base}){re.escape(TEMP_MARKER)}\d+-\d+"  # utils.atomic_files.temporary_path
    return re.fullmatch(rf"(?:{base})|{temp}", name) is not None


# ------------------------------------------------------------- conversion
def _target_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a tensor is stored as: NumPy has no bfloat16, float8 or complex32."""
    if dtype in _WIDENED:
        return _WIDENED[dtype]
    if dtype.is_floating_point and dtype not in _NUMPY_FLOATS:
        return torch.float32
    return dtype


def estimate_nbytes(obj: Any, depth: int = 0) -> int:
    """Cheap size estimate for the caller's thread: no conversion, never raises."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * _target_dtype(obj.dtype).itemsize + _ARRAY_HEADER_BYTES
    if isinstance(obj, np.ndarray):
        return obj.nbytes + _ARRAY_HEADER_BYTES
    if isinstance(obj, (str, bytes)):
        return len(obj)
    if depth < MAX_DEPTH and isinstance(obj, dict):
        return _CONTAINER_BYTES + sum(estimate_nbytes(v, depth + 1) for v in obj.values())
    if depth < MAX_DEPTH and isinstance(obj, (list, tuple)):
        return _CONTAINER_BYTES + sum(estimate_nbytes(v, depth + 1) for v in obj)
    return _SCALAR_BYTES


def _unsupported(path: str, what: str, fix: str) -> UnsupportedOutputError:
    return UnsupportedOutputError(f"debug output at '{path or '<root>'}' {what}; {fix}")


def _tensor_to_array(tensor: torch.Tensor, path: str) -> np.ndarray:
    """A detached CPU array that owns exactly its own bytes (a view would keep its whole base alive)."""
    if tensor.layout != torch.strided or tensor.is_quantized or tensor.device.type == "meta":
        raise _unsupported(path, f"is a {tensor.layout} / {tensor.dtype} tensor on {tensor.device}",
                           "return a dense tensor instead (e.g. tensor.to_dense() or tensor.dequantize())")
    tensor = tensor.detach().cpu().resolve_conj().resolve_neg()
    tensor = tensor.to(_target_dtype(tensor.dtype))
    array = tensor.numpy()
    compact = tensor.untyped_storage().nbytes() == array.nbytes and tensor.is_contiguous()
    return array if compact else array.copy()


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
    return array if array.flags.owndata and type(array) is np.ndarray else np.array(array, copy=True)


def _exact(obj: Any) -> Any:
    """``obj`` as its exact built-in leaf type (``obj`` itself when it already is one)."""
    for base, convert in _EXACT.items():
        if isinstance(obj, base):
            return obj if type(obj) is base else convert(obj)
    return obj


def _convert_key(key: Any, path: str) -> str | int:
    if isinstance(key, (str, int)):
        return _exact(key)
    if isinstance(key, np.integer):
        return int(key)
    raise _unsupported(path, f"has a dict key {key!r} of type {type(key).__name__}",
                       "dict keys must be str or int: convert the key with str(key)")


def _join(path: str, key: str | int) -> str:
    if isinstance(key, str):
        return f"{path}.{key}" if path else key
    return f"{path}[{key}]"


def to_page_value(obj: Any, path: str = "", _depth: int = 0) -> tuple[Any, int]:
    """Convert one debugger output to what a page holds; returns ``(value, real_nbytes)``.

    Raises ``UnsupportedOutputError`` naming the path inside the output (``'stats.hist[2]'``).
    """
    if _depth > MAX_DEPTH:
        raise _unsupported(path, f"is nested more than {MAX_DEPTH} levels deep (a reference cycle?)",
                           "return a flatter structure")
    if isinstance(obj, torch.Size):
        return [int(d) for d in obj], _CONTAINER_BYTES + _SCALAR_BYTES * len(obj)
    if isinstance(obj, torch.Tensor):
        if obj.dim() == 0:
            return to_page_value(obj.item(), path, _depth)
        array = _tensor_to_array(obj, path)
        return array, array.nbytes + _ARRAY_HEADER_BYTES
    if isinstance(obj, np.ndarray):
        array = _ndarray_to_array(obj, path)
        return array, array.nbytes + _ARRAY_HEADER_BYTES
    if isinstance(obj, np.generic):
        return to_page_value(obj.item(), path, _depth + 1)
    if isinstance(obj, (str, bytes)):
        return _exact(obj), len(obj)
    if isinstance(obj, _LEAF_TYPES):
        return _exact(obj), _SCALAR_BYTES * (2 if isinstance(obj, complex) else 1)
    if isinstance(obj, dict):
        return _convert_dict(obj, path, _depth)
    if isinstance(obj, (list, tuple)):
        pairs = [to_page_value(v, _join(path, i), _depth + 1) for i, v in enumerate(obj)]
        values = [value for value, _ in pairs]
        return (values if isinstance(obj, list) else tuple(values)), _CONTAINER_BYTES + sum(n for _, n in pairs)
    raise _unsupported(path, f"is a {type(obj).__module__}.{type(obj).__qualname__}, which a debug page cannot hold",
                       f"return {_SUPPORTED} (convert other objects first, e.g. str(obj) or torch.as_tensor(obj))")


def _convert_dict(obj: dict, path: str, depth: int) -> tuple[dict, int]:
    converted, nbytes = {}, _CONTAINER_BYTES
    for key, value in obj.items():
        key = _convert_key(key, path)
        converted[key], size = to_page_value(value, _join(path, key), depth + 1)
        nbytes += size + (len(key) if isinstance(key, str) else _SCALAR_BYTES)
    return converted, nbytes


# ---------------------------------------------------------------- writing
def _dump(page: dict, path: str) -> None:
    """The one low-level disk write (tests inject slow or failing disks here)."""
    with open(path, "wb") as f:
        pickle.Pickler(f, protocol=5).dump(page)


def _write_atomically(path: str, write: Callable[[str], None], what: str) -> None:
    """``atomic_write``, with disk errors told as what failed, where, and how to fix it."""
    try:
        atomic_write(path, write)
    except OSError as exc:
        raise PageWriteError(
            f"could not write debug {what} {path}: {exc.strerror or exc} "
            f"({type(exc).__name__}). Free disk space, check that the folder exists and is writable, "
            "or lower page_size_mb.", path, exc.errno) from exc


def write_page(path: str, page: dict[int, dict]) -> None:
    """Write a page so that ``path`` is either the complete page or absent."""
    _write_atomically(path, lambda temp: _dump(page, temp), "page")


def write_index(path: str, index: dict) -> None:
    """Atomic, compact JSON write: a reader never sees half an index."""
    _write_atomically(path, lambda temp: write_json_file(temp, index, indent=None), "index")


def read_index(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            index = json.load(f)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise CorruptPageError(f"debug index {path} is not valid JSON ({exc}); "
                               "delete it and rerun the epoch") from exc
    if not isinstance(index, dict) or index.get("version") != INDEX_VERSION:
        raise CorruptPageError(f"debug index {path} is not a version-{INDEX_VERSION} Lantern index; "
                               "it was written by another tool or another Lantern version")
    return index


# ---------------------------------------------------------------- loading
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


def _check_loaded(obj: Any, path: str, depth: int = 0) -> Any:
    """``obj`` with plain ndarrays; refuses leftovers a crafted file could assemble (dtypes, memoryviews, cycles)."""
    if depth > MAX_DEPTH:
        raise _Malformed(f"data nested more than {MAX_DEPTH} levels deep at '{path}'")
    if type(obj) is _LoadingArray:
        return obj.view(np.ndarray)
    if isinstance(obj, dict):
        for key, value in obj.items():
            if not isinstance(key, (str, int)):
                raise _Malformed(f"a dict key of type {type(key).__name__} at '{path}'")
            obj[key] = _check_loaded(value, _join(path, key), depth + 1)
        return obj
    if isinstance(obj, (list, tuple)):
        values = [_check_loaded(value, _join(path, i), depth + 1) for i, value in enumerate(obj)]
        return values if isinstance(obj, list) else tuple(values)
    if isinstance(obj, _LEAF_TYPES) or (isinstance(obj, np.generic) and not obj.dtype.hasobject):
        return obj
    raise _Malformed(f"a {type(obj).__name__} at '{path}'")


# Everything the C unpickler or a guard raises on a truncated or garbled file.
_MALFORMED_ERRORS = (pickle.UnpicklingError, EOFError, ValueError, KeyError, IndexError, TypeError,
                     AttributeError, struct.error, OverflowError, MemoryError, _Malformed)


def load_page(path: str) -> dict:
    """Load a page, running nothing from the file: only plain data and numeric arrays are rebuilt."""
    try:
        with open(path, "rb") as f:
            page = _check_loaded(_PageUnpickler(f).load(), "")
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
