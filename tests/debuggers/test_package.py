"""``from debuggers import ...`` as Pylon's package offers it, and ``import debuggers.capture`` as cheap as before."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import debuggers
from tests.runs import REPO_ROOT


def test_the_base_classes_the_wrapper_the_ready_debuggers_and_the_capture_api_import_from_the_package():
    from debuggers import (
        ActivationStatsDebugger,
        AttentionDebugger,
        BaseDebugger,
        CaptureDebugger,
        FeatureMapDebugger,
        ForwardDebugger,
        GradCAMDebugger,
        GradientFlowDebugger,
        LayerOutputDebugger,
        NaNInfDebugger,
        SequentialDebugger,
        capture_debug_state,
        clear_debug_states,
        disable_debug_mode,
        enable_debug_mode,
        get_debug_states,
        is_debug_enabled,
    )
    from debuggers.wrappers.sequential_debugger import SequentialDebugger as Home

    assert SequentialDebugger is Home
    assert issubclass(ForwardDebugger, BaseDebugger)
    for cls in (ActivationStatsDebugger, AttentionDebugger, CaptureDebugger, FeatureMapDebugger, GradCAMDebugger,
                GradientFlowDebugger, LayerOutputDebugger, NaNInfDebugger):
        assert issubclass(cls, BaseDebugger)
    assert all(map(callable, (capture_debug_state, clear_debug_states, disable_debug_mode, enable_debug_mode,
                              get_debug_states, is_debug_enabled)))


@pytest.mark.parametrize("name", debuggers.__all__)
def test_every_exported_name_is_the_object_of_its_module(name):
    module = importlib.import_module(debuggers._HOME_OF[name])
    assert getattr(debuggers, name) is getattr(module, name)
    assert name in dir(debuggers)


def test_an_unknown_name_says_what_the_package_exports():
    with pytest.raises(AttributeError, match="has no attribute 'ForwardDebuger'; it exports .*'ForwardDebugger'"):
        debuggers.ForwardDebuger  # noqa: B018


def test_importing_the_capture_points_imports_nothing_else_of_the_package_nor_torch():
    code = ("import sys, debuggers.capture; "
            "print(sorted(m for m in sys.modules if m.startswith(('debuggers', 'torch', 'numpy'))))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['debuggers', 'debuggers.capture']"
