"""The SAM2 guide's ``sam2.debug_utils`` in Lantern: every name of its debug API from one import.

    from data.viewer.debug_utils import (enable_debug_mode, disable_debug_mode, is_debug_enabled,
                                         capture_debug_state, get_debug_states, clear_debug_states,
                                         DebugStateCapture, visualize_debug_states)

The capture API lives with the capture points (``debuggers.capture``, which model code imports, also as
``from debuggers import ...``). ``visualize_debug_states`` draws with the viewer's figures
(``runners.eval_viewer.export.debug_states``): it is imported when first asked for by name, so model code that imports
this module for its capture points (by name or ``*``) loads none of the viewer (plotly, Dash, DuckDB, Arrow).
"""

from __future__ import annotations

from typing import Any

from debuggers.capture import (
    DebugStateCapture,
    capture_debug_state,
    clear_debug_states,
    disable_debug_mode,
    enable_debug_mode,
    get_debug_states,
    is_debug_enabled,
)

__all__ = ["DebugStateCapture", "capture_debug_state", "clear_debug_states", "disable_debug_mode",
           "enable_debug_mode", "get_debug_states", "is_debug_enabled"]  # and, on first use, visualize_debug_states


def __getattr__(name: str) -> Any:
    """``visualize_debug_states``, imported from the viewer the first time it is asked for."""
    if name != "visualize_debug_states":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from runners.eval_viewer.export.debug_states import visualize_debug_states

    return visualize_debug_states
