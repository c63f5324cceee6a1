"""Lantern's debuggers: ``from debuggers import ForwardDebugger, SequentialDebugger, capture_debug_state, ...``.

Each name is imported from its module on first use, not when the package is: model code imports
``debuggers.capture`` (the capture points, which import nothing else of this package), and Python runs this file
first, so importing it must stay as cheap as that module (``tests/debuggers/test_package.py``).
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {  # module: the names it gives the package
    "debuggers.base_debugger": ["BaseDebugger"],
    "debuggers.forward_debugger": ["ForwardDebugger"],
    "debuggers.wrappers.sequential_debugger": ["SequentialDebugger"],
    "debuggers.activation_stats_debugger": ["ActivationStatsDebugger"],
    "debuggers.attention_debugger": ["AttentionDebugger"],
    "debuggers.capture_debugger": ["CaptureDebugger"],
    "debuggers.feature_map_debugger": ["FeatureMapDebugger"],
    "debuggers.gradcam_debugger": ["GradCAMDebugger"],
    "debuggers.gradient_flow_debugger": ["GradientFlowDebugger"],
    "debuggers.layer_output_debugger": ["LayerOutputDebugger"],
    "debuggers.nan_inf_debugger": ["NaNInfDebugger"],
    "debuggers.mask_debugger": ["MaskDebugger"],
    "debuggers.segmentation_gradcam_debugger": ["SegmentationGradCAMDebugger"],
    "debuggers.frame_capture_debugger": ["FrameCaptureDebugger"],
    "debuggers.capture": ["capture_debug_state", "is_debug_enabled", "is_capturing", "enable_debug_mode",
                          "disable_debug_mode", "get_debug_states", "clear_debug_states", "DebugStateCapture",
                          "forward_debug_states"],
    "debuggers.batch_mode": ["BATCHED", "PER_DATAPOINT"],
    "debuggers.outputs": ["PerDatapoint"],
    "debuggers.utils": ["get_layer_by_name"],
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}
__all__ = list(_HOME_OF)


def __getattr__(name: str) -> Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'debuggers' has no attribute {name!r}; it exports {__all__}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found at once next time
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
