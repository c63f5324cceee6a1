"""Load a Python config file: a module that defines ``config = {...}``."""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

from utils.errors import ConfigError


def load_config(path: str) -> dict[str, Any]:
    """Import ``path`` as a module and return its ``config`` dict."""
    if not os.path.isfile(path):
        raise ConfigError(
            f"config file {path!r} does not exist; pass a Python file such as "
            "configs/examples/cnn_trainer.py to --config-filepath"
        )
    module_name = "lantern_config_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"config file {path!r} is not a Python module; give it a .py name")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    config = getattr(module, "config", None)
    if not isinstance(config, dict):
        raise ConfigError(
            f"config file {path!r} must define a dict named 'config' "
            f"(found {type(config).__name__}); see configs/examples/ for the format"
        )
    config.setdefault("work_dir", default_work_dir(path))
    config.setdefault("config_filepath", os.path.abspath(path))
    return config


def default_work_dir(config_path: str) -> str:
    """``configs/examples/x.py`` → ``logs/examples/x``: the config path mirrored under logs/."""
    parts = os.path.normpath(os.path.splitext(config_path)[0]).split(os.sep)
    if "configs" in parts:
        parts = parts[len(parts) - parts[::-1].index("configs"):]
    else:
        parts = parts[-1:]
    return os.path.join("logs", *parts)


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
