"""``CaptureDebugger``: collect what the model's capture points offer, per datapoint."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import torch

from debuggers.base_debugger import BaseDebugger, Removable
from debuggers.capture import listen
from debuggers.outputs import (
    KIND_ATTENTION,
    KIND_CAPTURED_STATES,
    KIND_EMBEDDING,
    KIND_POSITION_ENCODING,
    KIND_TENSOR,
    not_run_output,
)
from debuggers.tensor_utils import batch_size_of
from utils.errors import ConfigError

# (flag, word in the state name, kind): the guide's capture_* switches and the kind they give a state
_STATE_FAMILIES = (("capture_attention", "attention", KIND_ATTENTION),
                   ("capture_embeddings", "embedding", KIND_EMBEDDING),
                   ("capture_position_encoding", "position", KIND_POSITION_ENCODING))


class CaptureDebugger(BaseDebugger):
    """Listens to ``capture_debug_state`` while attached and keeps the matching states of each batch.

    Args:
        components, states: fnmatch patterns (``'blocks.*.attn'``, ``'attention_*'``); None keeps all.
        capture_attention, capture_embeddings, capture_position_encoding: False drops the
            states whose name contains 'attention', 'embedding' or 'position'.

    Each state gets a kind from its name (or ``metadata['kind']``): attention,
    embedding, position_encoding, else tensor. Data is copied at capture time
    (in-place changes later in the forward do not leak in). A tensor whose first
    dimension is the batch size is split per datapoint; one with a first
    dimension of 1 (e.g. a (1, N, D) encoding) is given to every datapoint, and so
    is any other tensor whole. A state offered twice in one forward pass keeps its
    last value.

    Output ``{'kind': 'captured_states', 'states': {component: {state: {'kind', 'data', 'metadata'}}}}``.
    """

    def __init__(self, components: Optional[Sequence[str]] = None, states: Optional[Sequence[str]] = None,
                 capture_attention: bool = True, capture_embeddings: bool = True,
                 capture_position_encoding: bool = True) -> None:
        self.components = _patterns(components, "components")
        self.states = _patterns(states, "states")
        flags = {"capture_attention": capture_attention, "capture_embeddings": capture_embeddings,
                 "capture_position_encoding": capture_position_encoding}
        self.excluded_words = [word for flag, word, _ in _STATE_FAMILIES if not flags[flag]]
        self._captured: dict[str, dict[str, tuple[Any, dict]]] = {}

    def attach(self, model: torch.nn.Module) -> list[Removable]:
        return [listen(self._on_capture)]

    def wants(self, component: str, state: str) -> bool:
        """Whether ``component.state`` passes the filters."""
        return (_matches(component, self.components) and _matches(state, self.states)
                and not any(word in state for word in self.excluded_words))

    def _on_capture(self, component: str, state: str, data: Any, metadata: Optional[dict]) -> None:
        if self.wants(component, state):
            copy = data.detach().clone() if isinstance(data, torch.Tensor) else data
            self._captured.setdefault(component, {})[state] = (copy, dict(metadata or {}))

    def __call__(self, datapoint: dict[str, Any], model: torch.nn.Module) -> dict[str, Any]:
        if not self._captured:
            return not_run_output(f"no capture point matched (components={self.components}, states={self.states}, "
                                  f"excluded words={self.excluded_words}) in this forward pass")
        batch = batch_size_of(datapoint)
        return {"kind": KIND_CAPTURED_STATES, "states": {
            component: {state: _record(state, data, metadata, batch) for state, (data, metadata) in states.items()}
            for component, states in self._captured.items()}}

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
    return next((kind for _, word, kind in _STATE_FAMILIES if word in state), KIND_TENSOR)


def _record(state: str, data: Any, metadata: dict, batch: int) -> dict[str, Any]:
    """One state's ``{'kind', 'data', 'metadata'}`` with its data batch first (or shared by all)."""
    metadata = {key: _plain(value) for key, value in metadata.items()}
    if isinstance(data, (torch.Tensor, np.ndarray)) and not (data.ndim >= 1 and data.shape[0] == batch):
        shared = data[0] if data.ndim >= 1 and data.shape[0] == 1 else data
        data = shared[None].expand(batch, *shared.shape) if isinstance(shared, torch.Tensor) \
            else np.broadcast_to(shared, (batch, *shared.shape))
    return {"kind": state_kind(state, metadata), "data": data, "metadata": metadata}


def _plain(value: Any) -> Any:
    """Metadata a page can hold: numbers, strings, None and lists of them; anything else as text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, torch.Tensor) and value.numel() <= 16:
        return value.tolist()
    return str(value)
