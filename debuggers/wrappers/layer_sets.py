"""One config entry for a debugger on every module of a type or a name pattern (the PyTorch chapter's hook loop).

    {'name': 'conv_stats', 'layers': {'type': 'Conv2d'},
     'debugger_config': {'class': ActivationStatsDebugger, 'args': {}}}
    {'name': 'relu_maps', 'layers': {'name': 'backbone.*.relu'},
     'debugger_config': {'class': FeatureMapDebugger, 'args': {'max_channels': 8}}}
    {'name': 'head_linears', 'layers': {'type': ['Linear'], 'name': 'head.*'}, 'debugger_config': {...}}

``type``: class names (a module matches when its class, or a class it derives from, has the name) or classes;
``name``: fnmatch patterns of ``model.named_modules()`` names; each may be one or a list. With both, a module must
match both. The entry becomes one debugger per matching module, named ``'<name>/<module name>'`` (its outputs'
key), with the module's name as its ``layer_name`` (or ``target_layer``, as ``GradCAMDebugger`` calls it).
A type no module has, or a pattern no module matches, stops the run at start-up naming the closest ones.
"""

from __future__ import annotations

import difflib
import fnmatch
import inspect
from typing import Any

import torch

from utils.errors import ConfigError

LAYER_ARGS = ("layer_name", "target_layer")  # the argument a debugger takes its module's name in
SPEC_KEYS = {"type", "name"}


def check_layer_set(entry: dict[str, Any], where: str) -> str:
    """The argument the entry's debugger takes its module's name in; a malformed ``layers`` entry raises."""
    spec = entry["layers"]
    if not isinstance(spec, dict) or not spec or not set(spec) <= SPEC_KEYS:
        raise ConfigError(f"{where}['layers'] must be a dict with 'type' (module class names or classes) and/or "
                          f"'name' (fnmatch patterns of module names), e.g. {{'type': 'Conv2d'}} or "
                          f"{{'name': 'backbone.*.relu'}}; got {spec!r}")
    for key, value in spec.items():
        allowed, what = ((str, type), "class name or class") if key == "type" else ((str,), "pattern")
        if not _as_list(value) or not all(isinstance(item, allowed) for item in _as_list(value)):
            raise ConfigError(f"{where}['layers']['{key}'] must be a {what} or a list of them, got {value!r}")
    config = entry["debugger_config"]
    cls, args = (config.get("class"), config.get("args") or {}) if isinstance(config, dict) else (None, {})
    params = inspect.signature(cls).parameters if inspect.isclass(cls) else {}
    arg = next((name for name in LAYER_ARGS if name in params), None)
    if arg is None:
        raise ConfigError(f"{where}: 'layers' gives each module's name to the debugger as {' or '.join(LAYER_ARGS)}, "
                          f"which {getattr(cls, '__name__', cls)!r} does not take; use a debugger of one layer "
                          "(a ForwardDebugger, GradCAMDebugger), or leave 'layers' out")
    if arg in args:
        raise ConfigError(f"{where}: 'layers' sets {arg} for each module; leave {arg}={args[arg]!r} out of 'args'")
    return arg


def expand_layer_set(entry: dict[str, Any], model: torch.nn.Module, where: str) -> tuple[list[dict[str, Any]], str]:
    """One plain entry per module the ``layers`` spec matches, and what to log: how many hooks, on what."""
    arg = check_layer_set(entry, where)
    spec, config = entry["layers"], entry["debugger_config"]
    modules = [(name, module) for name, module in model.named_modules() if name]
    types = _as_list(spec.get("type", []))
    patterns = _as_list(spec.get("name", []))
    _check_types(types, modules, model, where)
    _check_patterns(patterns, modules, model, where)
    matched = [name for name, module in modules
               if (not types or any(_is_type(module, t) for t in types))
               and (not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns))]
    what = " and ".join(part for part in (f"of type {_names(types)}" if types else "",
                                          f"named {_names(patterns)}" if patterns else "") if part)
    if not matched:
        raise ConfigError(f"{where}: no module of {type(model).__name__} is both {what}")
    entries = [{**{k: v for k, v in entry.items() if k != "layers"}, "name": f"{entry['name']}/{name}",
                "debugger_config": {**config, "args": {**(config.get("args") or {}), arg: name}}} for name in matched]
    shown = ", ".join(matched[:5]) + (f", ... ({len(matched) - 5} more)" if len(matched) > 5 else "")
    return entries, (f"debugger '{entry['name']}': {len(matched)} hook(s), one on each module {what} ({shown}); "
                     f"their outputs are named '{entry['name']}/<module>'")


def _check_types(types: list[Any], modules: list[tuple[str, torch.nn.Module]], model: torch.nn.Module,
                 where: str) -> None:
    present = sorted({type(module).__name__ for _, module in modules})
    for wanted in types:
        if not any(_is_type(module, wanted) for _, module in modules):
            name = wanted if isinstance(wanted, str) else wanted.__name__
            close = difflib.get_close_matches(name, present, n=5, cutoff=0.4)
            raise ConfigError(f"{where}['layers']['type']: no module of {type(model).__name__} is a {name}; "
                              + (f"closest types in the model: {close}" if close else f"its types: {present}"))


def _check_patterns(patterns: list[str], modules: list[tuple[str, torch.nn.Module]], model: torch.nn.Module,
                    where: str) -> None:
    names = [name for name, _ in modules]
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(name, pattern) for name in names):
            close = difflib.get_close_matches(pattern, names, n=5, cutoff=0.4)
            top = [name for name, _ in model.named_children()]
            raise ConfigError(f"{where}['layers']['name']: pattern '{pattern}' matches no module of "
                              f"{type(model).__name__}; " + (f"closest names: {close}" if close else
                                                             f"top-level modules: {top}")
                              + ". Names are the dotted paths of model.named_modules(); * matches any part")


def _is_type(module: torch.nn.Module, wanted: Any) -> bool:
    if isinstance(wanted, str):
        return any(cls.__name__ == wanted for cls in type(module).__mro__)
    return isinstance(module, wanted)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _names(items: list[Any]) -> str:
    return " or ".join(item if isinstance(item, str) else item.__name__ for item in items)
