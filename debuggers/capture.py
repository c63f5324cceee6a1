"""Capture points: model code exposes internal state that is not a module output.

Model code calls ``capture_debug_state(component_name, state_name, data, metadata)`` wherever
it has something worth seeing (attention scores inside a function, position
encodings, intermediate embeddings). When nothing listens the call returns after
one truthiness check, so capture points can stay in production code.

A listener is any callable ``listener(component, state, data, metadata)``;
``listen(listener)`` returns a handle whose ``remove()`` detaches it, in the manner
of ``torch.utils.hooks.RemovableHandle``. Lantern's ``CaptureDebugger`` and
``AttentionDebugger`` listen while a run captures.

The SAM2 guide's debug session is one more listener: ``enable_debug_mode(...)`` keeps every
offered state (``get_debug_states()``: ``{component: {state: {'data', 'metadata'}}}``) until
``clear_debug_states()``, and ``disable_debug_mode()`` stops it; ``DebugStateCapture`` is the
same as an object, with a store of its own.

This module is a layer below the rest of ``debuggers`` (model code imports it): it imports
nothing of ``debuggers``, nor torch (a tensor exists only once torch is imported, so it is
recognised through ``sys.modules``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Optional

from utils.errors import ConfigError

CaptureListener = Callable[[str, str, Any, Optional[dict]], None]
# the guide's capture_* switches and the family of states each one keeps: a state's family is the first of these
# words its name holds ('position_embeddings_final' is a position encoding, 'prompt_embeddings' an embedding)
STATE_FLAGS = {"capture_attention": "attention", "capture_position_encoding": "position",
               "capture_embeddings": "embedding"}

_listeners: dict[int, CaptureListener] = {}
_next_id = 0


class CaptureHandle:
    """Removes one listener; removing twice is harmless."""

    def __init__(self, listener_id: int) -> None:
        self.id = listener_id

    def remove(self) -> None:
        _listeners.pop(self.id, None)

    def __enter__(self) -> CaptureHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def listen(listener: CaptureListener) -> CaptureHandle:
    """Call ``listener`` for every ``capture_debug_state`` until the handle is removed."""
    global _next_id
    _next_id += 1
    _listeners[_next_id] = listener
    return CaptureHandle(_next_id)


def is_debug_enabled() -> bool:
    """True while anything listens (a debug session or a capturing debugger): worth computing costly states."""
    return bool(_listeners)


def capture_debug_state(component_name: str, state_name: str, data: Any, metadata: Optional[dict] = None) -> None:
    """Offer ``data`` (batch first) as ``component_name.state_name`` to whoever listens."""
    if not _listeners:
        return
    for listener in list(_listeners.values()):
        listener(component_name, state_name, data, metadata)


def state_family(state_name: str) -> Optional[str]:
    """'attention', 'position' or 'embedding' (``STATE_FLAGS``) by the first of them in the name; None for others."""
    return next((word for word in STATE_FLAGS.values() if word in state_name), None)


def excluded_families(flags: dict[str, Any], owner: str) -> list[str]:
    """The state families of the ``STATE_FLAGS`` switched off in ``flags`` (each must be True or False)."""
    for flag, value in flags.items():
        if not isinstance(value, bool):
            raise ConfigError(f"{owner} {flag} must be True or False, got {value!r}")
    return [family for flag, family in STATE_FLAGS.items() if not flags.get(flag, True)]


class DebugStateCapture:
    """A debug session: while enabled, every state offered at a capture point is kept, a copy of its data (later
    in-place changes do not reach it) with its metadata, the last offer of a state winning.

    ``capture_gradients=True``: a captured tensor that is part of an autograd graph also gets its gradient, as
    ``'gradient'`` beside ``'data'``, when a backward pass reaches it (None until then, and for a state no
    backward reaches).
    """

    def __init__(self) -> None:
        self.states: dict[str, dict[str, dict[str, Any]]] = {}
        self.excluded: list[str] = []
        self.capture_gradients = False
        self._handle: Optional[CaptureHandle] = None

    @property
    def enabled(self) -> bool:
        return self._handle is not None

    def enable(self, capture_attention: bool = True, capture_embeddings: bool = True,
               capture_position_encoding: bool = True, capture_gradients: bool = False) -> None:
        """Start keeping states (or change what is kept); states kept so far stay."""
        self.excluded = excluded_families({"capture_attention": capture_attention,
                                        "capture_embeddings": capture_embeddings,
                                        "capture_position_encoding": capture_position_encoding,
                                        "capture_gradients": capture_gradients}, "enable_debug_mode")
        self.capture_gradients = capture_gradients
        if self._handle is None:
            self._handle = listen(self._on_capture)

    def disable(self) -> None:
        """Stop keeping states; those kept stay readable until ``clear``."""
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def clear(self) -> None:
        """Forget the states kept so far (a dict returned earlier keeps them)."""
        self.states = {}

    def _on_capture(self, component: str, state: str, data: Any, metadata: Optional[dict]) -> None:
        if state_family(state) in self.excluded:
            return
        record = {"data": detached_copy(data), "metadata": dict(metadata or {})}
        if self.capture_gradients:
            record["gradient"] = None
            _keep_gradient(data, record)
        self.states.setdefault(component, {})[state] = record


def detached_copy(value: Any) -> Any:
    """``value`` with every tensor detached and copied and every NumPy array copied, in dicts, lists and tuples."""
    torch, numpy = sys.modules.get("torch"), sys.modules.get("numpy")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().clone()
    if numpy is not None and isinstance(value, numpy.ndarray):
        return value.copy()
    if isinstance(value, dict):
        return {key: detached_copy(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(detached_copy(item) for item in value) if type(value) in (list, tuple) else value
    return value


def _keep_gradient(data: Any, record: dict[str, Any]) -> None:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(data, torch.Tensor) and data.requires_grad:
        data.register_hook(lambda grad: record.__setitem__("gradient", grad.detach().clone()))


_session = DebugStateCapture()


def enable_debug_mode(capture_attention: bool = True, capture_embeddings: bool = True,
                      capture_position_encoding: bool = True, capture_gradients: bool = False) -> None:
    """Keep every state offered from now on (``get_debug_states``); the switches as ``DebugStateCapture.enable``."""
    _session.enable(capture_attention, capture_embeddings, capture_position_encoding, capture_gradients)


def disable_debug_mode() -> None:
    """Stop keeping states (those kept stay until ``clear_debug_states``)."""
    _session.disable()


def get_debug_states() -> dict[str, dict[str, dict[str, Any]]]:
    """``{component: {state: {'data', 'metadata'(, 'gradient')}}}`` kept since the last ``clear_debug_states``."""
    return _session.states


def clear_debug_states() -> None:
    """Forget the kept states, e.g. before each datapoint or batch."""
    _session.clear()
