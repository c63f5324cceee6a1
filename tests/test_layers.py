"""The code follows the data flow: no module imports from a layer above its own, and no modules import each other
in a circle. Read from the source with ``ast``, so an import inside a function or under ``TYPE_CHECKING`` counts too.

What counts as an import of what: ``import a.b`` and ``from a.b import name`` import ``a.b``; ``from a import b``
imports the module ``a.b`` where it is one (the package ``a`` itself where ``b`` is a name in it). A package is a module
like any other: its ``__init__`` may import (re-export) its own submodules, and that is a circle as soon as one of
them imports the package back. Running a package's ``__init__`` before any of its submodules is Python's doing, not
an import the code writes, so it is no edge.

The layers, lowest first (docs/guide.md, "How the code is laid out"):

1. ``utils``
2. ``data.datasets``, ``models``, ``metrics``, ``criteria`` and ``debuggers.capture`` (the capture points model code
   calls)
3. ``run_dir`` (the run folder: its files' names, the epochs and what each holds, the run-level files read as data)
4. ``debuggers`` (the debuggers, the sequential wrapper, the page format in ``debuggers.pages``)
5. ``analysis``
6. ``runners`` (trainer, evaluator, ``analyze``)
7. the viewer: ``runners.eval_viewer`` and ``data.viewer`` (display code and figures), the export
8. ``main``, ``configs``, ``benchmarks``
"""

from __future__ import annotations

import ast
import pathlib
from typing import Optional

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("utils", "data", "models", "metrics", "criteria", "run_dir", "debuggers", "analysis", "runners", "configs",
            "benchmarks")
# (prefix, layer): the longest matching prefix decides
LAYERS = [("utils", 1), ("data", 2), ("models", 2), ("metrics", 2), ("criteria", 2), ("debuggers.capture", 2),
          ("run_dir", 3), ("debuggers", 4), ("analysis", 5), ("runners", 6), ("runners.eval_viewer", 7),
          ("data.viewer", 7), ("main", 8), ("configs", 8), ("benchmarks", 8)]


def layer_of(module: str) -> Optional[int]:
    best = None
    for prefix, layer in LAYERS:
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, layer)
    return best[1] if best else None


def source_modules() -> dict[str, pathlib.Path]:
    modules = {"main": ROOT / "main.py"}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_modules(path: pathlib.Path, module: str, known: set[str]) -> set[str]:
    """Lantern modules that ``module`` imports; ``from pkg import name`` counts ``pkg.name`` when that is a module,
    else ``pkg``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # a relative import: ``from .x import y`` inside ``package``
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names)
    return {name for name in found if name in known}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = source_modules()
    return {module: imported_modules(path, module, set(modules)) for module, path in modules.items()}


def test_no_import_runs_up_the_data_flow(graph):
    upward = sorted(f"{module} (layer {layer_of(module)}) imports {name} (layer {layer_of(name)})"
                    for module, names in graph.items() for name in names
                    if layer_of(module) is not None and layer_of(name) is not None and layer_of(name) > layer_of(module)
                    and not name.startswith(module + "."))  # a package's __init__ may re-export its own modules
    assert not upward, "imports against the data flow:\n" + "\n".join(upward)


def test_page_storage_imports_no_debugger(graph):
    """``debuggers.pages`` stores what debuggers give; it may know their records' vocabulary (``debuggers.outputs``),
    not the debuggers themselves."""
    reaching_up = sorted(f"{module} imports {name}" for module, names in graph.items()
                         if module.startswith("debuggers.pages") for name in names
                         if name.startswith("debuggers") and not name.startswith("debuggers.pages")
                         and name not in ("debuggers", "debuggers.outputs"))
    assert not reaching_up, "page storage importing debuggers:\n" + "\n".join(reaching_up)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules that import each other in a circle, one sorted list per circle (Tarjan's strongly connected
    components)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_modules_import_each_other_in_a_circle(graph):
    """No circle at all, a package and its own submodules included (the module docstring says what an import is)."""
    found = circles(graph)
    assert not found, "modules that import each other in a circle:\n" + "\n".join(map(", ".join, found))


def test_the_check_sees_a_circle_through_a_package_and_its_submodule(tmp_path):
    """The viewer's old circle: ``app`` imported the ``callbacks`` package, whose ``__init__`` imported its submodule
    ``callbacks.export``, which imported ``export``, which imported ``app`` inside a function. A package importing its
    own submodule is an edge like any other, so the circle is seen."""
    sources = {"app": "from viewer.callbacks import register_callbacks\n",
               "callbacks/__init__": "from viewer.callbacks import export\n\n\ndef register_callbacks():\n    pass\n",
               "callbacks/export": "from viewer.export import export_report\n",
               "export": "def export_report():\n    from viewer.app import VERSION\n"}
    paths = {}
    for name, text in sources.items():
        path = tmp_path / "viewer" / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        paths["viewer." + name.removesuffix("/__init__").replace("/", ".")] = path
    found = circles({module: imported_modules(path, module, set(paths)) for module, path in paths.items()})
    assert found == [["viewer.app", "viewer.callbacks", "viewer.callbacks.export", "viewer.export"]]


def test_the_check_sees_an_upward_import(tmp_path):
    """The reader is not blind: an import from a higher layer, even inside a function, is found."""
    path = tmp_path / "probe.py"
    path.write_text("def f():\n    from runners.eval_viewer.backend import initialization\n")
    assert imported_modules(path, "debuggers.probe", {"runners.eval_viewer.backend.initialization"}) \
        == {"runners.eval_viewer.backend.initialization"}
    assert layer_of("runners.eval_viewer.backend.initialization") > layer_of("debuggers.probe")
