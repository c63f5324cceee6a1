"""The viewer by feature: each tab or panel is one folder holding its ids and what the browser may send them
(``ids.py``), its data and view, and its callbacks (``callbacks.py``, declaring its ``FEATURE``); ``app.py`` assembles
them from ``FEATURES``. Read from the source with ``ast`` (``tests/test_layers.py``'s reader).

A module that wires something to the app (a Dash callback, a Flask route or request hook) is a callback module. No
other module imports one: views and data are what callbacks use, never the other way round, so a view can be drawn
(the first page, the export, a test) without wiring anything. The exceptions are ``app.py``, which assembles the
features, a feature's callbacks calling on another callback module of the same feature, and a feature's callbacks
wiring through the shared one (``shared/opened.py``: the follow-ups of an open datapoint).
"""

from __future__ import annotations

import ast
import importlib
import pathlib

from runners.eval_viewer import app
from tests.test_layers import ROOT, imported_modules, source_modules

VIEWER = "runners.eval_viewer"
FOLDER = ROOT / "runners" / "eval_viewer"
SHARED_PLACES = ("shared", "figures", "backend", "assets", "__pycache__")  # not features
FEATURES = sorted(path.name for path in FOLDER.iterdir() if path.is_dir() and path.name not in SHARED_PLACES)
WIRING = {"callback", "clientside_callback", "route", "add_url_rule", "before_request"}


def wires(path: pathlib.Path) -> bool:
    """Whether the module wires something to an app: ``app.callback``, ``app.server.route`` and the like."""
    tree = ast.parse(path.read_text())
    return any(isinstance(node, ast.Attribute) and node.attr in WIRING for node in ast.walk(tree))


def feature_of(module: str) -> str:
    return module.split(".")[2] if module.startswith(VIEWER + ".") and module.count(".") >= 3 else ""


def callback_imports(paths: dict[str, pathlib.Path]) -> list[str]:
    """``importer imports callback module`` for every import of a callback module that is not allowed."""
    callbacks = {module for module, path in paths.items() if wires(path)}
    found = []
    for module, path in paths.items():
        for name in imported_modules(path, module, set(paths)) & callbacks:
            same_feature = module in callbacks and feature_of(module) == feature_of(name) != ""
            shared_wiring = module in callbacks and feature_of(name) == "shared"
            if module != f"{VIEWER}.app" and not same_feature and not shared_wiring:
                found.append(f"{module} imports {name}")
    return sorted(found)


def viewer_modules() -> dict[str, pathlib.Path]:
    return {module: path for module, path in source_modules().items()
            if module.startswith((VIEWER, "data.viewer"))}


def test_no_view_or_data_module_imports_a_callback_module():
    found = callback_imports(viewer_modules())
    assert not found, "callback modules imported by views or data:\n" + "\n".join(found)


def test_the_check_sees_a_view_that_imports_callbacks(tmp_path):
    """The old page layout imported what the Failures tab's callbacks computed; such an import is found."""
    view, callbacks = tmp_path / "view.py", tmp_path / "callbacks.py"
    view.write_text("from runners.eval_viewer.failures.callbacks import findings_content\n")
    callbacks.write_text("def register(app):\n    @app.callback()\n    def show():\n        pass\n")
    paths = {f"{VIEWER}.failures.view": view, f"{VIEWER}.failures.callbacks": callbacks}
    assert callback_imports(paths) == [f"{VIEWER}.failures.view imports {VIEWER}.failures.callbacks"]


def test_every_feature_folder_is_assembled_once_with_its_ids_and_docstring():
    declared = [importlib.import_module(f"{VIEWER}.{name}.callbacks").FEATURE for name in FEATURES]
    assert sorted(map(id, declared)) == sorted(map(id, app.FEATURES)), "FEATURES is not every feature folder, once"
    for name in FEATURES:
        ids = importlib.import_module(f"{VIEWER}.{name}.ids")
        assert importlib.import_module(f"{VIEWER}.{name}.callbacks").FEATURE.sends is ids.SENDS, name
        assert ast.get_docstring(ast.parse((FOLDER / name / "__init__.py").read_text())), f"{name} has no docstring"


def test_no_two_features_declare_one_component_id_or_what_is_sent_to_it():
    places = ["shared", *FEATURES]
    values: dict[str, str] = {}
    for place in places:
        ids = importlib.import_module(f"{VIEWER}.{place}.ids")
        for name, value in vars(ids).items():
            if name.isupper() and isinstance(value, str):
                assert values.setdefault(value, f"{place}.{name}") == f"{place}.{name}", \
                    f"{place}.{name} and {values[value]} are both {value!r}"
    declared = [key for place in places for key in importlib.import_module(f"{VIEWER}.{place}.ids").SENDS]
    assert len(declared) == len(set(declared)) == len(app.PAGE_SENDS)
