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
same as an object, with a store of its own; ``forward_debug_states`` keeps one forward pass's
states for a model's ``forward(..., return_debug_states=True)``.

Debug mode, as the guide means it (``is_debug_enabled()``), is on while what is offered is kept for
someone to read: the process's session (in ``get_debug_states()``), a forward pass asked for its
states, or a Lantern debugger capturing in a run (on its pages). A capture point that computes a
costly state asks ``is_capturing()``: whether anyone at all listens, a session of one's own included.

A model that runs frame by frame announces each frame, ``capture_debug_state(*FRAME_STATE, t)``, and
the end of its frames with ``None``; what is offered in between is filed under component
``<component>_frame_<t>`` (``frame_component``), so every frame's states are kept side by side.

This module is a layer below the rest of ``debuggers`` (model code imports it): it imports
nothing of ``debuggers``, nor torch (a tensor exists only once torch is imported, so it is
recognised through ``sys.modules``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Optional

from utils.errors import ConfigError

CaptureListener = Callable[[str, str, Any, Optional[dict]], None]
# the guide's capture_* switches and the family of states each one keeps: a state's family is the first of these
# words its name holds ('position_embeddings_final' is a position encoding, 'prompt_embeddings' an embedding)
STATE_FLAGS = {"capture_attention": "attention", "capture_position_encoding": "position",
               "capture_embeddings": "embedding"}

FRAME_STATE = ("video", "frame_index")  # where a frame-by-frame model offers each frame's number (None: done)
FRAME_SUFFIX = "_frame_{}"  # a frame's component: '<component>_frame_<t>'
_FRAME_COMPONENT = re.compile(r"^(.+)_frame_(\d+)$")

_listeners: dict[int, CaptureListener] = {}
_debug_mode: set[int] = set()  # the listeners that are debug mode (``is_debug_enabled``)
_next_id = 0


class CaptureHandle:
    """Removes one listener; removing twice is harmless."""

    def __init__(self, listener_id: int) -> None:
        self.id = listener_id

    def remove(self) -> None:
        _listeners.pop(self.id, None)
        _debug_mode.discard(self.id)

    def __enter__(self) -> CaptureHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def listen(listener: CaptureListener, debug_mode: bool = False) -> CaptureHandle:
    """Call ``listener`` for every ``capture_debug_state`` until the handle is removed; ``debug_mode``: it keeps
    what it hears for someone to read (``is_debug_enabled``)."""
    global _next_id
    _next_id += 1
    _listeners[_next_id] = listener
    if debug_mode:
        _debug_mode.add(_next_id)
    return CaptureHandle(_next_id)


def is_debug_enabled() -> bool:
    """The guide's debug mode: True from ``enable_debug_mode()`` to ``disable_debug_mode()`` (the states offered
    go to ``get_debug_states()``), during a forward pass asked for its states (``return_debug_states=True``), and
    in a run while a Lantern debugger captures (they go to its pages). A ``DebugStateCapture`` of one's own does not
    turn it on: where this is False, ``get_debug_states()`` gets nothing."""
    return bool(_debug_mode)


def is_capturing() -> bool:
    """True while anything listens (debug mode, a ``DebugStateCapture`` of one's own, any ``listen``): whether a
    capture point's costly state (a reshape, an extra tensor) has anyone to go to."""
    return bool(_listeners)


def frame_component(component: str, frame: Optional[int]) -> str:
    """The component a state offered during frame ``frame`` is filed under: ``<component>_frame_<t>``."""
    return component if frame is None else f"{component}{FRAME_SUFFIX.format(frame)}"


def split_frame(component: str) -> tuple[str, Optional[int]]:
    """``frame_component`` undone: the component's own name and its frame (None for one offered outside frames)."""
    match = _FRAME_COMPONENT.match(component)
    return (match.group(1), int(match.group(2))) if match else (component, None)


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
    in-place changes do not reach it) with its metadata, the last offer of a state winning. States offered during a
    frame (``FRAME_STATE``) are kept under their frame's component (``frame_component``): a clip keeps every
    frame's.

    ``capture_gradients=True``: a captured tensor that is part of an autograd graph also gets its gradient, as
    ``'gradient'`` beside ``'data'``, when a backward pass reaches it (None until then, and for a state no
    backward reaches). The gradient hook of a state goes when the state is offered again or cleared: one offered
    at every forward may be a parameter (a learned position embedding), which keeps its hooks for the whole run.

    ``debug_mode``: while enabled, it is the guide's debug mode (``is_debug_enabled``); the process's session
    (``enable_debug_mode``) is, a session of one's own (``DebugStateCapture()``) is not.
    """

    def __init__(self, debug_mode: bool = False) -> None:
        self.states: dict[str, dict[str, dict[str, Any]]] = {}
        self.excluded: list[str] = []
        self.capture_gradients = False
        self.debug_mode = debug_mode
        self._handle: Optional[CaptureHandle] = None
        self._frame: Optional[int] = None  # the frame being offered, None outside a clip
        self._gradient_hooks: dict[tuple[str, str], Any] = {}  # (component, state): its tensor's hook handle

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
        if self in _enabled:
            _enabled.remove(self)
        _enabled.append(self)
        if self._handle is None:
            self._handle = listen(self._on_capture, self.debug_mode)

    def disable(self) -> None:
        """Stop keeping states; those kept stay readable until ``clear``."""
        if self in _enabled:
            _enabled.remove(self)
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def clear(self) -> None:
        """Forget the states kept so far (a dict returned earlier keeps them) and remove their gradient hooks."""
        self.states = {}
        self._frame = None
        for hook in self._gradient_hooks.values():
            hook.remove()
        self._gradient_hooks = {}

    def _on_capture(self, component: str, state: str, data: Any, metadata: Optional[dict]) -> None:
        if (component, state) == FRAME_STATE:
            self._frame = None if data is None else int(data)
            return
        if state_family(state) in self.excluded:
            return
        component = frame_component(component, self._frame)
        record = {"data": detached_copy(data), "metadata": dict(metadata or {})}
        earlier = self._gradient_hooks.pop((component, state), None)
        if earlier is not None:
            earlier.remove()
        if self.capture_gradients:
            record["gradient"] = None
            hook = _keep_gradient(data, record)
            if hook is not None:
                self._gradient_hooks[(component, state)] = hook
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


def _keep_gradient(data: Any, record: dict[str, Any]) -> Any:
    """The handle of a hook that puts ``data``'s gradient in ``record``, or None where no gradient will come."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(data, torch.Tensor) and data.requires_grad:
        return data.register_hook(lambda grad: record.__setitem__("gradient", grad.detach().clone()))
    return None


_enabled: list[DebugStateCapture] = []  # the sessions enabled, the one enabled (or changed) last at the end
_session = DebugStateCapture(debug_mode=True)


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


@contextmanager
def forward_debug_states(wanted: bool) -> Iterator[Optional[DebugStateCapture]]:
    """For a model's ``forward(..., return_debug_states=True)``: while the forward pass runs, a session of its own
    keeps what is offered (debug mode is on), leaving out the families the session enabled last switched off
    (``enable_debug_mode``'s or a ``DebugStateCapture``'s; none where no session is enabled). Gradients are left to
    the sessions: a forward's own states are read, not trained through. Yields None when not ``wanted``."""
    if not wanted:
        yield None
        return
    capture = DebugStateCapture(debug_mode=True)
    capture.excluded = list(_enabled[-1].excluded) if _enabled else []
    capture._handle = listen(capture._on_capture, debug_mode=True)
    try:
        yield capture
    finally:
        capture.disable()
