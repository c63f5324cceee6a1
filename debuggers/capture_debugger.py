"""``CaptureDebugger``: collect what the model's capture points offer, per datapoint."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from itertools import islice
from typing import Any, Optional

import numpy as np
import torch

from debuggers.base_debugger import BaseDebugger, Removable
from debuggers.batch_mode import BATCHED
from debuggers.capture import excluded_families, listen, state_family
from debuggers.outputs import (
    KIND_ATTENTION,
    KIND_CAPTURED_STATES,
    KIND_EMBEDDING,
    KIND_POSITION_ENCODING,
    KIND_TENSOR,
)
from debuggers.pages.host_copies import copy_arrays
from debuggers.tensor_utils import as_tensor, batch_size_of
from utils.errors import ConfigError

MAX_SUMMARY_STATES = 8  # captured arrays with a norm column in the summary
_KIND_OF_FAMILY = {"attention": KIND_ATTENTION, "embedding": KIND_EMBEDDING, "position": KIND_POSITION_ENCODING}


class CaptureDebugger(BaseDebugger):
    """Listens to ``capture_debug_state`` while attached and keeps the matching states of each batch.

    Args:
        components, states: fnmatch patterns (``'blocks.*.attn'``, ``'attention_*'``); None keeps all.
        capture_attention, capture_embeddings, capture_position_encoding: False drops the
            states of that family: a state's family is the first of 'attention', 'position' and
            'embedding' its name holds (``debuggers.capture.state_family``).

    Each state gets a kind from its family (or ``metadata['kind']``): attention,
    position_encoding, embedding, else tensor. Data is copied at capture time, every
    tensor and array inside dicts, lists and tuples too (in-place changes later in the
    forward do not leak in). Each tensor is split per datapoint along its batch
    dimension: 0 by the batch contract, or ``metadata['batch_dim']`` declared by the
    capture point (1 for sequence-first ``(L, B, E)`` states, None for data without a
    batch). A tensor of size 1 there (a ``(1, N, D)`` encoding) is given to every
    datapoint without that dimension, in a dict or bare alike, whatever the batch size.
    Any other tensor whose batch dimension is not the batch's size is given whole to
    every datapoint and the record's ``'unsplit'`` says where it lies (``'.'`` for the
    data itself): it was not split because its batch dimension is not known. A state
    offered twice in one forward pass keeps its last value.

    ``'shared'`` is True for data the capture point declared without a batch (``batch_dim``
    None): the same for every datapoint whatever the batch (a position encoding), which the
    viewer draws once, marked as shared, folded away.

    Output ``{'kind': 'captured_states', 'states': {component: {state: {'kind', 'data', 'metadata',
    'unsplit', 'shared'}}}}``.
    """

    batch_mode = BATCHED  # outputs with the batch first (debuggers/batch_mode.py)

    def __init__(self, components: Optional[Sequence[str]] = None, states: Optional[Sequence[str]] = None,
                 capture_attention: bool = True, capture_embeddings: bool = True,
                 capture_position_encoding: bool = True) -> None:
        self.components = _patterns(components, "components")
        self.states = _patterns(states, "states")
        self.excluded = excluded_families({"capture_attention": capture_attention,
                                              "capture_embeddings": capture_embeddings,
                                              "capture_position_encoding": capture_position_encoding},
                                             "CaptureDebugger")
        self._captured: dict[str, dict[str, tuple[Any, dict]]] = {}

    def attach(self, model: torch.nn.Module) -> list[Removable]:
        return [listen(self._on_capture, debug_mode=True)]

    def wants(self, component: str, state: str) -> bool:
        """Whether ``component.state`` passes the filters."""
        return (_matches(component, self.components) and _matches(state, self.states)
                and state_family(state) not in self.excluded)

    def _on_capture(self, component: str, state: str, data: Any, metadata: Optional[dict]) -> None:
        if self.wants(component, state):
            self._captured.setdefault(component, {})[state] = (copy_arrays(data), dict(metadata or {}))

    def __call__(self, datapoint: dict[str, Any], model: torch.nn.Module) -> Optional[dict[str, Any]]:
        if not self._captured:
            return None
        batch = batch_size_of(datapoint)
        return {"kind": KIND_CAPTURED_STATES, "states": {
            component: {state: _record(state, data, metadata, batch) for state, (data, metadata) in states.items()}
            for component, states in self._captured.items()}}

    def not_run_reason(self, model: torch.nn.Module) -> Optional[str]:
        if self._captured:
            return None
        return (f"no capture point matched (components={self.components}, states={self.states}, families switched "
                f"off={self.excluded}) in this forward pass")

    def summary_columns(self, output: dict[str, Any]) -> dict[str, torch.Tensor]:
        """The Euclidean norm of each captured array (the first 8): ``'<component>.<state>.norm'``."""
        arrays = ((f"{component}.{state}.norm", record["data"])
                  for component, states in output["states"].items() for state, record in states.items()
                  if isinstance(record["data"], (np.ndarray, torch.Tensor)))
        return {name: torch.linalg.vector_norm(as_tensor(data).reshape(len(data), -1).double(), dim=1)
                for name, data in islice(arrays, MAX_SUMMARY_STATES)}

    def clear(self) -> None:
        self._captured = {}


def _patterns(value: Optional[Sequence[str]], name: str) -> Optional[list[str]]:
    if value is None:
        return None
    patterns = [value] if isinstance(value, str) else list(value)
    if not all(isinstance(p, str) for p in patterns):
        raise ConfigError(f"CaptureDebugger {name} must be fnmatch patterns (strings), got {value!r}")
    return patterns


def _matches(name: str, patterns: Optional[list[str]]) -> bool:
    return patterns is None or any(fnmatch.fnmatchcase(name, p) for p in patterns)


def state_kind(state: str, metadata: dict) -> str:
    """A state's kind: ``metadata['kind']`` if given, else from the words in its name."""
    if isinstance(metadata.get("kind"), str):
        return metadata["kind"]
    return _KIND_OF_FAMILY.get(state_family(state), KIND_TENSOR)


def _record(state: str, data: Any, metadata: dict, batch: int) -> dict[str, Any]:
    """One state's ``{'kind', 'data', 'metadata', 'unsplit', 'shared'}``, each tensor batch first or shared by
    all."""
    batch_dim = metadata.get("batch_dim", 0)
    if batch_dim is not None and (isinstance(batch_dim, bool) or not isinstance(batch_dim, int) or batch_dim < 0):
        raise ValueError(f"capture point '{state}' declares metadata['batch_dim'] = {batch_dim!r}; it must be the "
                         "dimension (int >= 0) of the batch in the data, e.g. 1 for (L, B, E), or None for none")
    unsplit: list[str] = []
    data = _batch_first(data, batch_dim, batch, "", unsplit)
    metadata = {key: plain(value) for key, value in metadata.items()}
    return {"kind": state_kind(state, metadata), "data": data, "metadata": metadata, "unsplit": unsplit,
            "shared": batch_dim is None}


def _batch_first(value: Any, dim: Optional[int], batch: int, path: str, unsplit: list[str]) -> Any:
    """Every tensor/array in ``value`` with its batch first; shared ones repeated for every datapoint."""
    if isinstance(value, dict):
        return {key: _batch_first(item, dim, batch, f"{path}.{key}", unsplit) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_batch_first(item, dim, batch, f"{path}[{i}]", unsplit) for i, item in enumerate(value))
    if not isinstance(value, (torch.Tensor, np.ndarray)):
        return value
    is_tensor = isinstance(value, torch.Tensor)
    if dim is not None and value.ndim > dim and value.shape[dim] == batch:
        return value if dim == 0 else value.movedim(dim, 0) if is_tensor else np.moveaxis(value, dim, 0)
    if dim is not None and value.ndim > dim and value.shape[dim] == 1:
        value = value.squeeze(dim) if is_tensor else np.squeeze(value, dim)
    elif dim is not None:
        unsplit.append(path or ".")
    return value[None].expand(batch, *value.shape) if is_tensor else np.broadcast_to(value, (batch, *value.shape))


def plain(value: Any) -> Any:
    """Metadata a page can hold: numbers, strings, None and lists of them; anything else as text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, torch.Tensor) and value.numel() <= 16:
        return value.tolist()
    return str(value)
