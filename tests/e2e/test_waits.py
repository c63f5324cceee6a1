"""The browser and viewer tests wait for the app's own ready signals, up to the generous waits of
``tests/e2e/conftest.py`` (``WAIT_MS``, ``SLOW_WAIT_MS``) and ``tests/reliability/viewer_server.py`` (``HTTP_WAIT_S``,
``START_WAIT_S``): none uses playwright's own ``expect`` (its assertions give up after 5 s, which failed the
README's test command on a loaded machine), a fixed pause (``wait_for_timeout``) or a timeout number of its own."""

from __future__ import annotations

import ast
import glob
import os

from tests.runs import REPO_ROOT

CONFTEST = os.path.join("tests", "e2e", "conftest.py")
WAIT_NAMES = ("timeout", "timeout_ms", "timeout_s", "seconds")
VIEWER_TESTS = ["tests/e2e/*.py", "tests/analysis/test_failures_tab_*.py", "tests/reliability/test_viewer_*.py",
                "tests/reliability/test_trust_boundary.py", "tests/reliability/viewer_server.py"]


def short_waits(path: str) -> list[str]:
    """Where the file at ``path`` (relative to the repository) waits in a way of its own."""
    with open(os.path.join(REPO_ROOT, path), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = []
    for node in ast.walk(tree):
        where = f"{path}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("playwright") and path != CONFTEST \
                and any(alias.name == "expect" for alias in node.names):
            found.append(f"{where} imports playwright's expect (5 s): use tests.e2e.conftest.expect")
        elif isinstance(node, ast.Attribute) and node.attr == "wait_for_timeout":
            found.append(f"{where} pauses for a fixed time: wait for a ready signal (tests/e2e/viewer_page.py)")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr.startswith("set_default") and any(isinstance(a, ast.Constant) for a in node.args):
            found.append(f"{where} sets a timeout number of its own: use WAIT_MS or SLOW_WAIT_MS")
        elif isinstance(node, ast.keyword) and node.arg in WAIT_NAMES and isinstance(node.value, ast.Constant):
            found.append(f"{where} waits {node.value.value} of its own: use the shared waits")
        elif isinstance(node, ast.FunctionDef):
            arguments = node.args.posonlyargs + node.args.args
            defaults = list(zip(arguments[len(arguments) - len(node.args.defaults):], node.args.defaults))
            defaults += list(zip(node.args.kwonlyargs, node.args.kw_defaults))
            found += [f"{where} waits {default.value} by default: use the shared waits" for argument, default
                      in defaults if argument.arg in WAIT_NAMES and isinstance(default, ast.Constant)]
    return found


def test_viewer_tests_wait_for_ready_signals_with_the_shared_generous_waits():
    paths = sorted({os.path.relpath(path, REPO_ROOT) for pattern in VIEWER_TESTS
                    for path in glob.glob(os.path.join(REPO_ROOT, pattern))})
    assert CONFTEST in paths and len(paths) > 8, paths
    found = [problem for path in paths for problem in short_waits(path)]
    assert not found, "\n".join(found)
