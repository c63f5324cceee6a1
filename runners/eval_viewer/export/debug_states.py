"""``visualize_debug_states``: figures of debug states for notebooks and scripts (the SAM2 guide's), drawn as the
viewer draws them and, with ``save_path``, written as one self-contained HTML page like the report."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any, Optional

import numpy as np
import plotly.graph_objects as go

from debuggers.capture_debugger import plain, state_kind
from debuggers.outputs import KIND_CAPTURED_STATES, KIND_TENSOR
from debuggers.pages.values import to_page_value
from runners.eval_viewer.export.report import ExportError, Item, datapoint_items, write_html
from runners.eval_viewer.figures.context import DrawContext


def visualize_debug_states(debug_states: Mapping[str, Any], save_path: Optional[str] = None,
                           create_summary: bool = False, image: Optional[np.ndarray] = None,
                           datapoint: int = 0) -> list[go.Figure]:
    """Figures of debug states, for notebooks and scripts (the SAM2 guide's ``visualize_debug_states``).

    ``debug_states`` is either the guide's states, ``{component: {state: {'data', 'metadata'}}}`` as
    ``get_debug_states()`` gives them (datapoint ``datapoint`` of each is drawn, along its batch dimension:
    0, or ``metadata['batch_dim']``; a state declared without one, ``batch_dim`` None, is drawn whole), or
    one datapoint's debug outputs ``{debugger_name: output}`` as ``load_debug_outputs`` gives them, or one
    output. States are drawn by kind as ``CaptureDebugger``'s are (attention, embeddings, position encodings,
    other tensors), a state's ``'gradient'`` beside it. ``create_summary``: first, a table of every array
    (shape, dtype, range, mean, std, NaN and Inf counts). ``save_path`` (a ``.html`` file, or a folder that
    gets ``debug_states.html``): the same as one self-contained HTML page.
    """
    if is_guide_states(debug_states):
        outputs = {"debug states": states_of_datapoint(debug_states, datapoint)}
    else:  # page values already, unless given straight from a debugger
        outputs = to_page_value({"output": debug_states} if "kind" in debug_states else debug_states)
    items: list[Item] = [summary_table(outputs)] if create_summary else []
    items += datapoint_items(outputs, DrawContext(image=image))
    if save_path is not None:
        path = save_path if save_path.endswith(".html") else os.path.join(save_path, "debug_states.html")
        write_html(path, "Lantern debug outputs", [("debug outputs", items)])
    return [item for item in items if isinstance(item, go.Figure)]


def is_guide_states(value: Any) -> bool:
    """Whether ``value`` is ``{component: {state: {'data': ...}}}``, as the guide's ``get_debug_states`` gives."""
    return isinstance(value, Mapping) and bool(value) and all(
        isinstance(states, Mapping) and states and all(isinstance(r, Mapping) and "data" in r for r in states.values())
        for states in value.values())


def states_of_datapoint(states: Mapping[str, Mapping[str, Mapping[str, Any]]], datapoint: int) -> dict[str, Any]:
    """The guide's states as one datapoint's ``captured_states`` output (``CaptureDebugger``'s records)."""
    drawn: dict[str, dict[str, Any]] = {}
    for component, records in states.items():
        for state, record in records.items():
            metadata = dict(record.get("metadata") or {})
            batch_dim = metadata.get("batch_dim", 0)
            parts = [(state, record["data"], state_kind(state, metadata))]
            if record.get("gradient") is not None:
                parts.append((f"{state}.gradient", record["gradient"], KIND_TENSOR))
            for name, data, kind in parts:
                drawn.setdefault(component, {})[name] = {
                    "kind": kind, "data": to_page_value(_row(data, batch_dim, datapoint, f"{component}.{name}")),
                    "metadata": {key: plain(value) for key, value in metadata.items()},
                    "unsplit": [], "shared": batch_dim is None}
    return {"kind": KIND_CAPTURED_STATES, "states": drawn}


def _row(data: Any, batch_dim: Optional[int], datapoint: int, where: str) -> Any:
    """Datapoint ``datapoint`` of a tensor or array along ``batch_dim`` (a size-1 dimension is every datapoint's)."""
    if batch_dim is None or not hasattr(data, "shape") or len(data.shape) <= batch_dim:
        return data
    size = data.shape[batch_dim]
    if size != 1 and datapoint >= size:
        raise ExportError(f"state {where} has {size} datapoint(s) along its batch dimension {batch_dim}; "
                          f"there is no datapoint {datapoint}")
    index = [slice(None)] * batch_dim + [0 if size == 1 else datapoint]
    return data[tuple(index)]


def summary_table(outputs: Mapping[str, Any]) -> go.Figure:
    """One row per array in ``outputs`` (page values): where it is, shape, dtype, min, max, mean, std, NaN and Inf
    counts; a captured state is named ``component.state``."""
    rows = [_array_row(path, array) for name, output in outputs.items() for path, array in _arrays(output, name)]
    columns = ["array", "shape", "dtype", "min", "max", "mean", "std", "NaN", "Inf"]
    table = go.Figure(go.Table(header={"values": columns, "align": "left"},
                               cells={"values": [[row[k] for row in rows] for k in columns], "align": "left"}))
    return table.update_layout(title_text=f"summary: {len(rows)} array(s)", height=120 + 26 * max(len(rows), 1))


def _arrays(value: Any, path: str) -> Iterable[tuple[str, np.ndarray]]:
    if isinstance(value, np.ndarray):
        yield path, value
    elif isinstance(value, Mapping) and value.get("kind") == KIND_CAPTURED_STATES:
        for component, states in value.get("states", {}).items():
            for state, record in states.items():
                yield from _arrays(record.get("data"), f"{path}.{component}.{state}")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _arrays(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _arrays(item, f"{path}[{i}]")


def _array_row(path: str, array: np.ndarray) -> dict[str, Any]:
    row: dict[str, Any] = {"array": path, "shape": str(array.shape), "dtype": str(array.dtype)}
    numeric = array.dtype.kind in "biuf" and array.size > 0
    values = array.astype(np.float64) if numeric else None
    finite = values[np.isfinite(values)] if numeric else None
    for key, reduce in (("min", np.min), ("max", np.max), ("mean", np.mean), ("std", np.std)):
        row[key] = f"{reduce(finite):.4g}" if numeric and finite.size else ""
    row["NaN"] = int(np.isnan(values).sum()) if numeric else ""
    row["Inf"] = int(np.isinf(values).sum()) if numeric else ""
    return row
