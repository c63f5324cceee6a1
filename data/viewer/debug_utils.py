"""The SAM2 guide's ``sam2.debug_utils`` in Lantern: every name of its debug API from one import.

    from data.viewer.debug_utils import (enable_debug_mode, disable_debug_mode, is_debug_enabled,
                                         capture_debug_state, get_debug_states, clear_debug_states,
                                         DebugStateCapture, visualize_debug_states)

The capture API lives with the capture points (``debuggers.capture``, which model code imports, also as
``from debuggers import ...``); ``visualize_debug_states`` draws with the viewer's figures, so it lives at the
viewer's layer (``runners.eval_viewer.export``) and this module, at that layer too, gathers both.
"""

from debuggers.capture import (
    DebugStateCapture,
    capture_debug_state,
    clear_debug_states,
    disable_debug_mode,
    enable_debug_mode,
    get_debug_states,
    is_debug_enabled,
)
from runners.eval_viewer.export.report import visualize_debug_states

__all__ = ["DebugStateCapture", "capture_debug_state", "clear_debug_states", "disable_debug_mode",
           "enable_debug_mode", "get_debug_states", "is_debug_enabled", "visualize_debug_states"]
