"""Criteria and metrics read the model's outputs and the datapoint's labels by key, set in their args.

A missing key would be a bare ``KeyError: 'logits'`` from deep inside a criterion; these readers say which
keys there are and which argument picks one.
"""

from __future__ import annotations

from typing import Any

from utils.errors import DatasetContractError, LanternUserError, ModelContractError
from utils.ops import describe_value


def model_output(outputs: Any, key: str, reader: object, entry: str) -> Any:
    """``outputs[key]`` for ``reader`` (a criterion or metric built from ``config[entry]``)."""
    return _read(outputs, key, "the model's outputs", "output_key", reader, entry,
                 f"or return {{{key!r}: ...}} from the model's forward (a plain model's outputs are named by "
                 "config['model_outputs'])", ModelContractError)


def label(labels: Any, key: str, reader: object, entry: str) -> Any:
    """``labels[key]`` for ``reader`` (a criterion or metric built from ``config[entry]``)."""
    return _read(labels, key, "the datapoint's labels", "label_key", reader, entry,
                 f"or name it {key!r} in the dataset's labels", DatasetContractError)


def _read(mapping: Any, key: str, what: str, argument: str, reader: object, entry: str, other_fix: str,
          error: type[LanternUserError]) -> Any:
    if isinstance(mapping, dict) and key in mapping:
        return mapping[key]
    if not isinstance(mapping, dict):
        found = f"are {describe_value(mapping)}, not a dict"
    else:
        found = f"have the keys {sorted(map(str, mapping))}" if mapping else "are empty"
    choice = repr(next(iter(mapping))) if isinstance(mapping, dict) and len(mapping) == 1 else "<one of them>"
    raise error(f"{type(reader).__name__} reads {what}[{key!r}], but they {found}: set {argument}={choice} in "
                f"config['{entry}']['args'], {other_fix}")
