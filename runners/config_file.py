"""Load a Python config file: a module that defines ``config = {...}``."""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

from runners.import_path import (
    LANTERN_ROOT,
    ProjectImportError,
    enclosing_packages,
    explain_import_error,
    project_config_module,
)
from utils.errors import ConfigError


def load_config(path: str) -> dict[str, Any]:
    """Import ``path`` as a module and return its ``config`` dict.

    The modules beside the config file become importable first (``runners/import_path.py``), so a project
    that lives anywhere runs without ``PYTHONPATH``.
    """
    if not os.path.isfile(path):
        raise ConfigError(
            f"config file {path!r} does not exist; pass a Python file such as "
            "configs/examples/cnn_trainer.py to --config-filepath"
        )
    if not path.endswith(".py"):
        raise ConfigError(f"config file {path!r} is not a Python module; give it a .py name")
    try:
        module_name = project_config_module(path)
    except ProjectImportError as exc:
        raise ConfigError(f"config file {path!r}: {exc}") from None
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:
        explained = explain_import_error(exc, path)
        if explained is None:
            raise
        raise ConfigError(f"config file {path!r}: {explained}") from exc
    config = getattr(module, "config", None)
    if not isinstance(config, dict):
        raise ConfigError(
            f"config file {path!r} must define a dict named 'config' "
            f"(found {type(config).__name__}); see configs/examples/ for the format"
        )
    config = dict(config)  # other configs may import this module's dict: the defaults below are this run's
    config.setdefault("work_dir", default_work_dir(path))
    config.setdefault("config_filepath", os.path.abspath(path))
    return config


def default_work_dir(config_path: str) -> str:
    """Where a config's results go unless it sets ``work_dir``: projects' configs do not collide.

    Lantern's ``configs/examples/x.py`` → ``logs/examples/x``. A project's config is prefixed with the
    project's folder name: ``myproj/configs/exp/a.py`` → ``logs/myproj/exp/a``, ``myproj/config.py`` →
    ``logs/myproj/config``. ``logs/`` is the ``results_folder``.
    """
    return os.path.join(results_folder(), *_run_names(config_path))


def results_folder() -> str:
    """``logs`` under the folder you run from, or, where that folder is part of a Python package (it holds
    ``__init__.py``), ``logs`` beside the outermost package: results never go among a project's modules."""
    parent, packages = enclosing_packages(os.getcwd())
    return os.path.join(parent, "logs") if packages else "logs"


def viewer_log_dir(config: dict[str, Any]) -> str:
    """What to give the viewer's ``--log-dirs`` after a run: for a default work dir, its project's folder in the
    results folder (``logs/myproj``: every config of the project, to compare), else the work dir itself."""
    path = config.get("config_filepath")
    if path and config["work_dir"] == default_work_dir(path):
        return os.path.join(results_folder(), _run_names(path)[0])
    return str(config["work_dir"])


def _run_names(config_path: str) -> list[str]:
    """The folder names of a config's default work dir under the results folder (see ``default_work_dir``)."""
    parts = os.path.abspath(os.path.splitext(config_path)[0]).split(os.sep)
    if "configs" in parts:
        at = len(parts) - 1 - parts[::-1].index("configs")
        in_lantern = os.path.realpath(os.sep.join(parts[:at]) or os.sep) == os.path.realpath(LANTERN_ROOT)
        return [*([] if in_lantern else parts[at - 1:at]), *parts[at + 1:]]
    return [part for part in parts[-2:] if part]


def describe_config(value: Any) -> Any:
    """A JSON-able, address-free description of a config, to tell two runs apart.

    Classes and functions become ``module.qualname``; other objects their type.
    """
    if isinstance(value, dict):
        return {str(k): describe_config(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [describe_config(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '?')}.{value.__qualname__}"
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


_ABSENT = "(absent)"


def config_differences(old: Any, new: Any, path: str = "") -> list[str]:
    """Where two described configs (``describe_config``) differ, as ``"path: old → new"`` lines: a refused
    work dir must say what changed, or the user cannot tell which edit made it another run."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = list(old) + [key for key in new if key not in old]
        return [line for key in keys for line in config_differences(
            old.get(key, _ABSENT), new.get(key, _ABSENT), f"{path}.{key}" if path else str(key))]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [line for i, (a, b) in enumerate(zip(old, new)) for line in config_differences(a, b, f"{path}[{i}]")]
    return [] if old == new else [f"{path}: {_short(old)} → {_short(new)}"]


def flat_config(value: Any, path: str = "") -> dict[str, Any]:
    """A described config (``describe_config``) as ``{path: value}`` of its leaves, the paths written as
    ``config_differences`` writes them (``optimizer.args.lr``, ``debugger.args.debuggers_config[0].name``): runs set
    side by side, one column per path."""
    if isinstance(value, dict) and value:
        items = [(f"{path}.{key}" if path else str(key), item) for key, item in value.items()]
    elif isinstance(value, list) and value:
        items = [(f"{path}[{i}]", item) for i, item in enumerate(value)]
    else:
        return {path: value}
    return {leaf: found for where, item in items for leaf, found in flat_config(item, where).items()}


def _short(value: Any, limit: int = 60) -> str:
    text = value if value is _ABSENT else repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
