"""``data.viewer.debug_utils``, the model-side debug API, loads none of the viewer: model code imports it for its
capture points, and plotly, Dash, DuckDB and Arrow would cost it seconds; ``visualize_debug_states`` is loaded on
first use."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.runs import REPO_ROOT

VIEWER_LIBRARIES = ("plotly", "dash", "duckdb", "pyarrow")


def loaded_after(code: str) -> dict[str, bool]:
    """Which of the viewer's libraries a fresh interpreter has loaded after running ``code``."""
    probe = f"import sys, json\n{code}\nprint(json.dumps({{m: m in sys.modules for m in {VIEWER_LIBRARIES!r}}}))"
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.splitlines()[-1])


def test_importing_the_debug_api_loads_none_of_the_viewer():
    for code in ("import data.viewer.debug_utils", "from data.viewer.debug_utils import *  # noqa",
                 "from data.viewer.debug_utils import capture_debug_state, is_debug_enabled"):
        assert loaded_after(code) == dict.fromkeys(VIEWER_LIBRARIES, False), code


def test_visualize_debug_states_is_loaded_when_asked_for():
    code = "from data.viewer.debug_utils import visualize_debug_states\nassert callable(visualize_debug_states)"
    assert loaded_after(code)["plotly"]
