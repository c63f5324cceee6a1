"""On-disk format of debug pages, shared by the page writer and the viewer.

A page is a joblib file ``page_{n}.pkl`` (``page_rank{r}_{n}.pkl`` when several
ranks write into one folder) holding ``{datapoint_idx: {debugger_name: output}}``.
``index.json`` (``index_rank{r}.json``) maps every idx to its page, so a reader
opens one page per datapoint instead of all of them.

Why the care:

* Pages are written under a hidden temporary name and renamed: a page on disk is
  complete or absent, even after SIGKILL, and ``PAGE_GLOB`` never matches a
  temporary file. (No fsync: the target is a killed process, not a power cut,
  and fsync would make page writes slower than the ``numpy.save`` baseline.)
* Outputs are converted to plain Python data and NumPy arrays whose sizes are
  their real byte counts, so pages split at the configured size.
* ``load_page`` rebuilds only plain data and non-object NumPy arrays: a page
  from elsewhere or a tampered one is refused before anything in it runs.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import re
import struct
import threading
from collections.abc import Callable
from typing import Any

import joblib
import numpy as np
import torch
from joblib.numpy_pickle import NumpyArrayWrapper, NumpyUnpickler
from joblib.numpy_pickle_utils import Unpickler

try:  # NumPy >= 2
    from numpy._core.multiarray import _reconstruct, scalar
except ImportError:  # pragma: no cover - NumPy 1.x
    from numpy.core.multiarray import _reconstruct, scalar

PAGE_GLOB = "page_*.pkl"
INDEX_VERSION = 1
MAX_DEPTH = 64  # deeper outputs are almost certainly reference cycles

_CONTAINER_BYTES = 16  # rough per-container cost; arrays dominate real pages
_ARRAY_HEADER_BYTES = 128  # joblib's pickled array wrapper
_SCALAR_BYTES = 8
_WIDENED = {torch.bfloat16: torch.float32, torch.complex32: torch.complex64}
_NUMPY_FLOATS = (torch.float16, torch.float32, torch.float64)
_LEAF_TYPES = (str, bytes, int, float, bool, complex, type(None))
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
    return re.fullmatch(rf"(?:{base})|\.(?:{base})\.tmp-\d+-\d+", name) is not None


def _temp_path(path: str) -> str:
    """Hidden, per-process and per-thread, so PAGE_GLOB never matches it and writers never collide."""
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.tmp-{os.getpid()}-{threading.get_ident()}")


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
    if type(array) not in (np.ndarray, np.memmap):
        raise _unsupported(path, f"is a {type(array).__name__} (an ndarray subclass)",
                           "return np.asarray(value) or a tensor instead")
    return array if array.flags.owndata and type(array) is np.ndarray else np.array(array, copy=True)


def _convert_key(key: Any, path: str) -> str | int:
    if isinstance(key, (str, int)):
        return key
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
        return obj, len(obj)
    if isinstance(obj, _LEAF_TYPES):
        return obj, _SCALAR_BYTES * (2 if isinstance(obj, complex) else 1)
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
    joblib.dump(page, path)


def _write_atomically(path: str, write: Callable[[str], None], what: str) -> None:
    temp = _temp_path(path)
    try:
        write(temp)
        os.replace(temp, path)
    except BaseException as exc:
        _remove_quietly(temp)
        if isinstance(exc, OSError):
            raise PageWriteError(
                f"could not write debug {what} {path}: {exc.strerror or exc} "
                f"({type(exc).__name__}). Free disk space, check that the folder exists and is writable, "
                "or lower page_size_mb.", path, exc.errno) from exc
        raise


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def write_page(path: str, page: dict[int, dict]) -> None:
    """Write a page so that ``path`` is either the complete page or absent."""
    _write_atomically(path, lambda temp: _dump(page, temp), "page")


def write_index(path: str, index: dict) -> None:
    """Atomic JSON write: a reader never sees half an index."""
    text = json.dumps(index)

    def write(temp: str) -> None:
        with open(temp, "w", encoding="utf-8") as f:
            f.write(text)

    _write_atomically(path, write, "index")


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


def _check_dtype(dtype: Any) -> np.dtype:
    if not isinstance(dtype, np.dtype):
        raise _Malformed(f"an array dtype that is a {type(dtype).__name__}")
    if dtype.hasobject:
        raise _Refused(f"an array of Python objects (dtype {dtype}), whose loading would unpickle arbitrary objects")
    return dtype


def _safe_dtype(*args: Any) -> np.dtype:
    return _check_dtype(np.dtype(*args))


def _safe_reconstruct(subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
    if subtype is not _NDARRAY:
        raise _Refused("an ndarray subclass")
    if tuple(shape) != (0,):
        raise _Malformed(f"an array placeholder of shape {shape!r}")
    _check_dtype(np.dtype(dtype))
    return _reconstruct(np.ndarray, (0,), dtype)


def _safe_scalar(dtype: Any, *args: Any) -> Any:
    return scalar(_check_dtype(dtype), *args)


_ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy", "ndarray"): _NDARRAY,
    ("numpy", "dtype"): _safe_dtype,
    ("numpy.core.multiarray", "_reconstruct"): _safe_reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _safe_reconstruct,
    ("numpy.core.multiarray", "scalar"): _safe_scalar,
    ("numpy._core.multiarray", "scalar"): _safe_scalar,
    ("joblib.numpy_pickle", "NumpyArrayWrapper"): NumpyArrayWrapper,
    ("builtins", "complex"): complex,
}
_WRAPPER_KEYS = {"subclass", "shape", "order", "dtype", "allow_mmap", "numpy_array_alignment_bytes"}


class _SafeUnpickler(NumpyUnpickler):
    """joblib's unpickler restricted to the globals and BUILD targets a Lantern page contains."""

    dispatch = NumpyUnpickler.dispatch.copy()

    def __init__(self, path: str, file: Any) -> None:
        super().__init__(path, file, ensure_native_byte_order=True)
        self._file_size = os.fstat(file.fileno()).st_size

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise _Refused(f"a reference to the global {module}.{name}") from None

    def load_build(self) -> None:
        """Arrays are read from a validated copy of the wrapper; other objects are never BUILD targets."""
        state, inst = self.stack[-1], self.stack[-2]
        if type(inst) is NumpyArrayWrapper:
            self.stack[-2:] = [self._read_array(state)]
            return
        if not (isinstance(inst, np.dtype) or type(inst) is np.ndarray):
            raise _Refused(f"a BUILD instruction on a {type(inst).__name__}")
        Unpickler.load_build(self)
        _check_dtype(inst if isinstance(inst, np.dtype) else inst.dtype)

    dispatch[pickle.BUILD[0]] = load_build

    def _read_array(self, state: Any) -> np.ndarray:
        if not isinstance(state, dict) or not set(state) <= _WRAPPER_KEYS or "dtype" not in state:
            raise _Malformed("an array wrapper with unexpected attributes")
        if state.get("subclass") is not _NDARRAY:
            raise _Refused("an array of an ndarray subclass")
        dtype, shape, order = _check_dtype(state["dtype"]), state.get("shape"), state.get("order")
        alignment = state.get("numpy_array_alignment_bytes")
        if not (isinstance(shape, tuple) and all(type(d) is int and d >= 0 for d in shape)) \
                or order not in ("C", "F") or not (alignment is None or type(alignment) is int):
            raise _Malformed(f"an array wrapper with shape {shape!r}, order {order!r}")
        if math.prod(shape) * dtype.itemsize > self._file_size - self.file_handle.tell():
            raise _Malformed(f"an array of shape {shape} whose data runs past the end of the file")
        wrapper = NumpyArrayWrapper(np.ndarray, shape, order, dtype, allow_mmap=False,
                                    numpy_array_alignment_bytes=alignment)
        return wrapper.read(self, self.ensure_native_byte_order)


def _check_loaded(obj: Any, path: str, depth: int = 0) -> None:
    """Refuse leftovers a crafted file could assemble (bare wrappers, sets, cycles)."""
    if depth > MAX_DEPTH:
        raise _Malformed(f"data nested more than {MAX_DEPTH} levels deep at '{path}'")
    if isinstance(obj, dict):
        for key, value in obj.items():
            if not isinstance(key, (str, int)):
                raise _Malformed(f"a dict key of type {type(key).__name__} at '{path}'")
            _check_loaded(value, _join(path, key), depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            _check_loaded(value, _join(path, i), depth + 1)
    elif not (isinstance(obj, _LEAF_TYPES) or type(obj) is np.ndarray
              or (isinstance(obj, np.generic) and not obj.dtype.hasobject)):
        raise _Malformed(f"a {type(obj).__name__} at '{path}'")


_MALFORMED_ERRORS = (pickle.UnpicklingError, EOFError, ValueError, KeyError, IndexError, TypeError,
                     AttributeError, struct.error, OverflowError, _Malformed)


def load_page(path: str) -> dict:
    """Load a page, running nothing from the file: only plain data and numeric arrays are rebuilt."""
    try:
        with open(path, "rb") as f:
            page = _SafeUnpickler(path, f).load()
        _check_loaded(page, "")
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
