"""Build objects from ``{'class': X, 'args': {...}}`` config entries.

Every component of a run (dataset, model, optimizer, metric, debugger) is named
in the config this way, so a config file is plain data that can be read, copied
and diffed. Building is recursive: an argument that is itself a config entry is
built first, except the arguments a class names in ``UNBUILT_ARGS``, which it is
given as written and builds itself (``SequentialDebugger`` builds its debuggers,
some once the model is known).
"""

from __future__ import annotations

import copy
import difflib
import inspect
from typing import Any

import torch

from utils.errors import ConfigEntryError, ConfigError, LanternUserError, describe_exception

CONFIG_KEYS = {"class", "args"}


def is_config_entry(obj: Any) -> bool:
    """True for a dict of exactly ``{'class', 'args'}`` (``args`` may be omitted)."""
    return isinstance(obj, dict) and "class" in obj and set(obj) <= CONFIG_KEYS


def build_from_config(config: Any, where: str = "config", **overrides: Any) -> Any:
    """Build ``config`` recursively; ``overrides`` replace or add keyword arguments.

    Containers are rebuilt element by element; anything else is returned as is.
    Arguments are deep-copied so that building twice never shares state, except
    modules, parameters, tensors and datasets, which are passed by reference.
    """
    if isinstance(config, dict) and "class" in config:
        return _build_entry(config, where, overrides)
    if overrides:
        raise ConfigError(f"{where}: keyword overrides need a {{'class', 'args'}} entry, got {type(config).__name__}")
    if isinstance(config, dict):
        return {k: build_from_config(v, f"{where}['{k}']") for k, v in config.items()}
    if isinstance(config, (list, tuple)):
        return type(config)(build_from_config(v, f"{where}[{i}]{_named(v)}") for i, v in enumerate(config))
    return config


def _named(value: Any) -> str:
    """`` ('fm')`` for a list entry that names itself (a debugger entry's ``name``): an error then says which."""
    name = value.get("name") if isinstance(value, dict) else None
    return f" ({name!r})" if isinstance(name, str) else ""


def _build_entry(entry: dict, where: str, overrides: dict) -> Any:
    extra = set(entry) - CONFIG_KEYS
    if extra:
        raise ConfigError(
            f"{where}: a config entry holds only 'class' and 'args', found also {sorted(extra)}; "
            "move those keys into 'args'"
        )
    cls = entry["class"]
    if not callable(cls):
        raise ConfigError(f"{where}['class'] must be a class or function, got {cls!r}; import it in the config file")
    args = entry.get("args", {}) or {}
    if not isinstance(args, dict):
        raise ConfigError(f"{where}['args'] must be a dict of keyword arguments, got {type(args).__name__}")
    unbuilt = getattr(cls, "UNBUILT_ARGS", ())  # config entries the class builds itself, when it knows how
    kwargs = {k: _copy_arg(v) if k in unbuilt else build_from_config(_copy_arg(v), f"{where}['args']['{k}']")
              for k, v in args.items()}
    kwargs.update(overrides)
    check_arguments(cls, kwargs, where)
    try:
        return cls(**kwargs)
    except LanternUserError:
        raise  # says what to fix already (a nested entry, a debugger's own argument check)
    except Exception as exc:
        raise ConfigEntryError(f"{where} ({_name(cls)}): {describe_exception(exc)}") from exc


def _copy_arg(value: Any) -> Any:
    """Deep-copy plain data; share objects that are big or stateful by design."""
    if isinstance(value, (torch.nn.Module, torch.Tensor, torch.utils.data.Dataset)):
        return value
    if isinstance(value, dict):
        return {k: _copy_arg(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copy_arg(v) for v in value)
    try:
        return copy.deepcopy(value)
    except TypeError:
        return value


def check_arguments(cls: Any, kwargs: dict, where: str) -> None:
    """Fail early, with the closest valid names, when ``kwargs`` do not fit ``cls``."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return
    params = signature.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    accepted = [n for n, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    for name in kwargs:
        if name not in params:
            close = difflib.get_close_matches(name, accepted, n=3)
            hint = f" Did you mean {close}?" if close else ""
            raise ConfigError(
                f"{where}: {_name(cls)} has no argument '{name}'. It accepts {accepted}.{hint}"
            )
    missing = [
        n for n, p in params.items()
        if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and n not in kwargs
    ]
    if missing:
        raise ConfigError(f"{where}: {_name(cls)} needs argument(s) {missing}; add them to 'args'")


def _name(cls: Any) -> str:
    return getattr(cls, "__qualname__", repr(cls))
