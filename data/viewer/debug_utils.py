"""The SAM2 guide's ``sam2.debug_utils`` in Lantern: every name of its debug API from one import.

    from data.viewer.debug_utils import (enable_debug_mode, disable_debug_mode, is_debug_enabled,
                                         capture_debug_state, get_debug_states, clear_debug_states,
                                         DebugStateCapture, visualize_debug_states, SAM2Visualizer)

The capture API lives with the capture points (``debuggers.capture``, which model code imports, also as
``from debuggers import ...``). ``visualize_debug_states`` and ``SAM2Visualizer`` draw with the viewer's figures
(``runners.eval_viewer.export``): each is imported when first asked for by name, so model code that imports this
module for its capture points (by name or ``*``) loads none of the viewer (plotly, Dash, DuckDB, Arrow).
"""

from __future__ import annotations

import importlib
from typing import Any

from debuggers.capture import (
    DebugStateCapture,
    capture_debug_state,
    clear_debug_states,
    disable_debug_mode,
    enable_debug_mode,
    forward_debug_states,
    get_debug_states,
    is_capturing,
    is_debug_enabled,
)

__all__ = ["DebugStateCapture", "capture_debug_state", "clear_debug_states", "disable_debug_mode",
           "enable_debug_mode", "forward_debug_states", "get_debug_states", "is_capturing",
           "is_debug_enabled"]  # and, on first use, those of DRAWING

DRAWING = {"visualize_debug_states": "runners.eval_viewer.export.debug_states",
           "SAM2Visualizer": "runners.eval_viewer.export.sam2_visualizer"}  # name: the viewer's module defining it


def __getattr__(name: str) -> Any:
    """``visualize_debug_states`` or ``SAM2Visualizer``, imported from the viewer the first time it is asked for."""
    if name not in DRAWING:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(DRAWING[name]), name)
