"""Where Python finds Lantern's packages and a project's own modules.

Lantern's top-level packages have short, common names (``utils``, ``models``, ``data``, ...), and so do a
project's modules. Python keeps one module per name, so two rules decide who gets it:

- Lantern's packages always win: ``put_lantern_first`` moves Lantern's root ahead of an import-path entry
  (the current folder, ``PYTHONPATH``) that holds a module named like one of them. Every ``python -m
  runners...`` entry point gets this from ``runners/__init__.py``; ``python main.py`` has it by construction.
- The current folder never stands in for an installed package: ``python -m`` puts it first on the import path,
  so ``cd RUN && python -m runners.analyze --run .`` would import a ``numpy.py`` lying in the run folder.
  ``put_current_folder_last`` moves it after the installed packages (its modules still import by other names).
- A project's modules are found from its config file (``project_config_module``). A config folder that is a
  package (it holds ``__init__.py``) is imported as that package, so ``from .models import MyNet`` never meets
  Lantern's ``models``. A plain config folder is appended to the import path, after Lantern's packages; a module
  there named like one of them could never be imported, so it is refused, naming what to rename. Then come the
  project folder that holds the config's ``configs/`` folder (``root/configs/exp.py`` imports ``root``'s
  packages from anywhere) and the folder you run from (``python -m`` has it too), also after Lantern's packages:
  a module there named like one of Lantern's is explained when an import of it fails (``explain_import_error``),
  not refused, as a project root often holds a ``configs/`` or ``data/`` folder of its own.

This module imports nothing of Lantern: it must work before any Lantern package can be trusted to import.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
import traceback
from typing import Optional

LANTERN_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG_MODULE_PREFIX = "lantern_config_"


class ProjectImportError(ImportError):
    """A project's module cannot be imported beside Lantern's; the message says what to rename."""


def lantern_packages() -> list[str]:
    """Lantern's top-level package names (the folders of its root that hold ``__init__.py``)."""
    return sorted(name for name in os.listdir(LANTERN_ROOT)
                  if os.path.isfile(os.path.join(LANTERN_ROOT, name, "__init__.py")))


def put_lantern_first() -> None:
    """Put Lantern's root first on ``sys.path`` if any of its package names would be found elsewhere first."""
    for name in lantern_packages():
        spec = importlib.machinery.PathFinder.find_spec(name)
        if spec is not None and not _is_inside(_spec_location(spec), LANTERN_ROOT):
            sys.path.insert(0, LANTERN_ROOT)
            importlib.invalidate_caches()
            return


def put_current_folder_last() -> None:
    """Under ``python -m`` (``sys.argv[0]`` is ``-m`` while the package imports), move the current folder from
    the head of ``sys.path`` to its end, unless it is Lantern's root. Nothing but the standard library is
    imported before this runs (``runners/__init__.py``), so no module was taken from that folder yet."""
    if sys.argv[:1] != ["-m"] or not sys.path:
        return
    try:
        if not os.path.samefile(sys.path[0], os.getcwd()) or os.path.samefile(sys.path[0], LANTERN_ROOT):
            return
    except OSError:  # a removed folder: nothing to import from it
        return
    sys.path.append(sys.path.pop(0))
    importlib.invalidate_caches()


def project_config_module(config_path: str) -> str:
    """Make the modules beside ``config_path`` importable; return the module name to import the config as.

    A config inside a package (``myproj/__init__.py`` beside it) is named ``myproj.config`` and the package
    is imported from that folder; a config in a plain folder is named ``lantern_config_<stem>`` and its
    folder is appended to ``sys.path``, followed by the other ``project_folders``.
    """
    path = os.path.realpath(config_path)
    stem = os.path.splitext(os.path.basename(path))[0]
    parent, packages = enclosing_packages(os.path.dirname(path))
    if not packages:
        check_no_clash(os.path.dirname(path))
    for folder in project_folders(path):
        if folder not in sys.path:
            sys.path.append(folder)
    if not packages:
        return CONFIG_MODULE_PREFIX + stem
    top = os.path.join(parent, packages[0])
    if packages[0] in lantern_packages() and parent != LANTERN_ROOT:
        raise ProjectImportError(
            f"the project package {top} is named like Lantern's package '{packages[0]}', so Python cannot import "
            f"both. Rename the folder (e.g. to my_{packages[0]}) and the imports that name it")
    _import_package_from(parent, packages[0])
    for depth in range(2, len(packages) + 1):
        importlib.import_module(".".join(packages[:depth]))
    return ".".join([*packages, stem])


def check_no_clash(folder: str) -> None:
    """Refuse a plain project folder holding a module named like a Lantern package."""
    clashes = [name for name in lantern_packages() if _module_file(folder, name)]
    if not clashes:
        return
    files = ", ".join(_module_file(folder, name) for name in clashes)
    raise ProjectImportError(
        f"{files} {'has' if len(clashes) == 1 else 'have'} the same name as Lantern's package(s) "
        f"{clashes}: Python keeps one module per name, and Lantern's own is needed to run, so `import "
        f"{clashes[0]}` can never reach yours. Either rename yours (e.g. {clashes[0]}.py -> "
        f"{os.path.basename(folder)}_{clashes[0]}.py, and the imports that name it), or make {folder} a package: "
        f"add an empty __init__.py there and import your modules relatively (`from .{clashes[0]} import ...`). "
        "See docs/your_project.md")


def project_folders(config_path: str) -> list[str]:
    """Where a config's imports find the project's modules, after Lantern's packages: the config's folder if it is
    not a package, the project root above its ``configs/`` folder (above the packages holding that folder, if
    any), and the current folder; Lantern's root is left out (it is first already)."""
    config_folder = os.path.dirname(os.path.realpath(config_path))
    folders = [] if enclosing_packages(config_folder)[1] else [config_folder]
    parts = config_folder.split(os.sep)
    if "configs" in parts:
        at = len(parts) - 1 - parts[::-1].index("configs")
        folders.append(enclosing_packages(os.sep.join(parts[:at]) or os.sep)[0])
    folders.append(os.path.realpath(os.getcwd()))
    found: list[str] = []
    for folder in folders:
        if folder not in found and not _same_folder(folder, LANTERN_ROOT):
            found.append(folder)
    return found


def explain_import_error(exc: ImportError, config_path: str) -> Optional[str]:
    """Why the config's imports failed, where Lantern can tell, else None: a module of the project named like one
    of Lantern's packages (Python imports Lantern's), or a module found nowhere (where Lantern looked)."""
    top = (exc.name or "").split(".")[0]
    if not top:
        return None
    folders = project_folders(config_path)
    if top in lantern_packages():
        shadowed = [found for found in (_module_file(folder, top) for folder in folders) if found]
        if not shadowed:
            return None
        return (f"{exc}{_raised_at(exc)}: {shadowed[0]} is named like Lantern's package '{top}', and Python imports "
                "Lantern's (its packages come first on the import path, or Lantern could not run). Rename yours "
                f"(e.g. {top} -> my_{top}) and the imports that name it. See docs/your_project.md")
    if not isinstance(exc, ModuleNotFoundError) or importlib.util.find_spec(top) is not None:
        return None
    return (f"{exc}{_raised_at(exc)}. The project's modules are imported from {', '.join(folders)} (the config's "
            "folder, the project folder holding configs/, the folder you run from) and PYTHONPATH: run from the "
            f"folder that holds '{top}', or install it if it is a package. See docs/your_project.md")


def _raised_at(exc: BaseException) -> str:
    """`` (at file:line)``: the import statement that failed, the last frame outside importlib's machinery."""
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if not frame.filename.startswith("<")]
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def enclosing_packages(folder: str) -> tuple[str, list[str]]:
    """The folder above the outermost package holding ``folder``, and the package names down to it."""
    packages: list[str] = []
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        packages.insert(0, os.path.basename(folder))
        folder = os.path.dirname(folder)
    return folder, packages


def _import_package_from(parent: str, name: str) -> None:
    """Import package ``name`` from ``parent``, replacing a same-named package imported from elsewhere."""
    location = os.path.join(parent, name)
    loaded = sys.modules.get(name)
    if loaded is not None and location in {os.path.realpath(p) for p in getattr(loaded, "__path__", [])}:
        return
    for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[module]  # another project's package of the same name: the config asks for this one
    spec = importlib.machinery.PathFinder.find_spec(name, [parent])
    if spec is None or spec.loader is None:
        raise ProjectImportError(f"cannot import the project package {location}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


def _module_file(folder: str, name: str) -> str:
    """The module ``folder/name.py`` or the folder ``folder/name/`` of Python files, if either exists, else ''."""
    module, package = os.path.join(folder, name + ".py"), os.path.join(folder, name)
    if os.path.isfile(module):
        return module
    if os.path.isdir(package) and any(entry.endswith(".py") for entry in os.listdir(package)):
        return package + os.sep
    return ""


def _spec_location(spec: importlib.machinery.ModuleSpec) -> str:
    if spec.origin and spec.origin != "namespace":
        return spec.origin
    return next(iter(spec.submodule_search_locations or []), "")


def _same_folder(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _is_inside(path: str, folder: str) -> bool:
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return os.path.commonpath([path, folder]) == folder
