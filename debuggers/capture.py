"""Capture points: model code exposes internal state that is not a module output.

Model code calls ``capture_debug_state(component, state, data, metadata)`` wherever
it has something worth seeing (attention scores inside a function, position
encodings, intermediate embeddings). When nothing listens the call returns after
one truthiness check, so capture points can stay in production code.

A listener is any callable ``listener(component, state, data, metadata)``;
``listen(listener)`` returns a handle whose ``remove()`` detaches it, in the manner
of ``torch.utils.hooks.RemovableHandle``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

CaptureListener = Callable[[str, str, Any, Optional[dict]], None]

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
    """True while at least one listener is attached (worth computing costly states)."""
    return bool(_listeners)


def capture_debug_state(
    component: str, state: str, data: Any, metadata: Optional[dict] = None
) -> None:
    """Offer ``data`` (batch first) as ``component.state`` to whoever listens."""
    if not _listeners:
        return
    for listener in list(_listeners.values()):
        listener(component, state, data, metadata)
