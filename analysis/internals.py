"""What the failure analysis needs of the captured outputs themselves, read from an epoch's debug pages.

- Feature vectors: where a debugger captured a feature space per datapoint (a ``layer_output`` output, or a plain
  1-D array), one value per unit, for the subgroups (``analysis/subgroups.py``) and the label suspects'
  neighbourhoods. A ``layer_output`` is pooled over its positions with its units kept, by the layout it records
  (``debuggers/feature_layout.py``): (C,) as it is; (C, T), (C, H, W), (C, D, H, W) channels-first, the mean over
  the positions; tokens (T, D), the mean over the real tokens (weighted by ``token_weight``, the real tokens each
  pooled block holds). An output that records no layout (captured before it did) is channels-first, the
  convention its pooling followed.
- NaN origins: where a ``NaNInfDebugger`` ran, the modules that first produced a NaN or Inf, by count.

Pages are read through the safe reader (``load_debug_outputs``), one page at a time. An epoch whose debug
outputs cannot be read (a damaged index, locations file or page) gives no internals, and says why: the
table's findings do not need them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from analysis.findings import NaNOrigin
from debuggers.feature_layout import TOKENS
from debuggers.outputs import KIND_LAYER_OUTPUT, KIND_NAN_ORIGIN, is_shared_record
from debuggers.pages.errors import DebugDataError
from debuggers.pages.reader import load_debug_outputs


@dataclass
class CapturedInternals:
    """What the pages hold that the table does not: pooled vectors and NaN origins, by debugger."""

    vectors: dict[str, tuple[np.ndarray, np.ndarray]]  # debugger -> (idx, (n, d) vectors)
    nan_origins: list[NaNOrigin]
    problem: Optional[str] = None  # why the captured outputs were skipped


def read_internals(epoch_dir: str) -> CapturedInternals:
    """Pooled vectors and NaN origins of every captured datapoint of ``epoch_dir`` (empty when none, or, with
    the reason in ``problem``, when they cannot be read)."""
    try:
        return _read_captured(epoch_dir)
    except DebugDataError as exc:
        return CapturedInternals({}, [], f"the debug outputs of {epoch_dir} were skipped, so subgroups in feature "
                                         f"spaces and NaN origins are left out: {exc}")


def feature_space_names(outputs: dict[str, Any]) -> list[str]:
    """The debuggers whose output in ``outputs`` (one datapoint's) is a feature vector, pooled as above."""
    return [name for name, output in outputs.items()
            if not is_shared_record(output) and _pooled_vector(output) is not None]


def read_feature_space(epoch_dir: str, debugger: str) -> tuple[np.ndarray, np.ndarray]:
    """One debugger's pooled vectors of every captured datapoint of ``epoch_dir``: (idx, (n, d) float32), in idx
    order, read page by page and keeping that debugger's alone. ``DebugDataError`` when the pages cannot be read or
    its vectors differ in length."""
    rows: dict[int, np.ndarray] = {}
    outputs = load_debug_outputs(epoch_dir)  # None: the debugger did not run for this epoch
    for idx, datapoint in outputs.page_by_page() if outputs is not None else ():
        output = datapoint.get(debugger)
        vector = None if output is None or is_shared_record(output) else _pooled_vector(output)
        if vector is not None:
            rows[idx] = vector.astype(np.float32)
    if len({vector.shape for vector in rows.values()}) > 1:
        raise DebugDataError(f"the outputs of {debugger!r} in {epoch_dir} are vectors of different lengths: they are "
                             "no one feature space")
    order = sorted(rows)
    return np.array(order, dtype=np.int64), (np.stack([rows[i] for i in order]) if order else np.zeros((0, 0)))


def _read_captured(epoch_dir: str) -> CapturedInternals:
    outputs = load_debug_outputs(epoch_dir)  # None: the debugger did not run for this epoch
    vectors: dict[str, dict[int, np.ndarray]] = defaultdict(dict)
    origins: dict[tuple[str, str], list[int]] = defaultdict(list)
    if outputs is not None:
        for idx, datapoint in outputs.page_by_page():
            _collect(idx, datapoint, vectors, origins)
    stacked = {name: (np.array(sorted(rows)), np.stack([rows[i] for i in sorted(rows)]))
               for name, rows in vectors.items() if len({v.shape for v in rows.values()}) == 1}
    ranked = sorted(origins.items(), key=lambda item: -len(item[1]))
    return CapturedInternals(stacked, [NaNOrigin(module, kind, len(idx), np.array(sorted(idx), dtype=np.int64))
                                       for (module, kind), idx in ranked])


def _collect(idx: int, datapoint: dict[str, Any], vectors: dict, origins: dict) -> None:
    for name, output in datapoint.items():
        if is_shared_record(output):
            continue
        vector = _pooled_vector(output)
        if vector is not None:
            vectors[name][idx] = vector
        if isinstance(output, dict) and output.get("kind") == KIND_NAN_ORIGIN and output.get("first_module"):
            origins[(str(output["first_module"]), str(output.get("module_type")))].append(idx)


def _pooled_vector(output: Any) -> np.ndarray | None:
    """A feature vector, one value per unit: a ``layer_output`` pooled over its positions, or a 1-D array a debugger
    returned."""
    if isinstance(output, dict) and output.get("kind") == KIND_LAYER_OUTPUT:
        return pooled_layer_output(output)
    if isinstance(output, np.ndarray) and output.ndim == 1 and output.dtype.kind == "f" and len(output) > 1:
        return output.astype(np.float64)
    return None


def pooled_layer_output(output: dict[str, Any]) -> np.ndarray | None:
    """One datapoint's ``layer_output`` as its units' means over its positions (the module docstring's rule)."""
    array = np.asarray(output.get("output"), dtype=np.float64)
    if array.ndim == 1:
        return array
    if array.ndim < 1 or array.ndim > 4:
        return None
    if output.get("layout") != TOKENS:
        return array.reshape(len(array), -1).mean(axis=1)
    tokens = array.reshape(-1, array.shape[-1])
    weight = np.asarray(output.get("token_weight", np.ones(len(tokens))), dtype=np.float64).reshape(-1)
    if len(weight) != len(tokens) or not weight.sum() > 0:
        return None
    return weight @ tokens / weight.sum()
