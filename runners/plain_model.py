"""A user's model as it is: a ``forward`` that takes tensors and returns a tensor, a tuple or a Hugging Face
``ModelOutput`` runs in Lantern with no wrapper of the user's own.

Lantern's own contract is ``forward(inputs: dict) -> dict``: the criterion, the metric and every debugger read named
outputs, and debuggers that rerun the model call it with the datapoint's ``inputs`` dict. ``PlainModel`` gives a
plain model that contract around its own call, keeping its module tree: its layers, parameters and state_dict keys
are the plain model's own, under the same names (``features.1``, not ``model.features.1``), so debuggers address the
same layers and a checkpoint loads into the plain model outside Lantern.

The rule (checked on the evaluated dataset's first datapoint at start-up, else on the first batch):

- **Which models**: one whose ``forward``'s first parameter is annotated as a dict (or Mapping), or named ``inputs``
  without annotation, takes the ``inputs`` dict itself (Lantern's contract; it must return a dict, unless the config
  sets ``model_outputs``, which names any model's outputs). Any other is plain, and so is every model when the
  config sets ``model_inputs``.
- **Its inputs**: ``config['model_inputs']`` when set (a key: that input by position; a list of keys: by position;
  ``{argument: key}``: by keyword); else the inputs whose keys are names of ``forward``'s parameters, by keyword
  (Hugging Face's ``pixel_values``, ``input_ids``, ``attention_mask``); else the datapoint's only input.
- **Its outputs**: a tensor is ``{'logits': t}``, a tuple or list ``{'output_0': ..., 'output_1': ...}``, both
  named by ``config['model_outputs']`` instead when set (a name, or a list of names); a dict or ``ModelOutput``
  keeps its own names (its fields that are not None).
"""

from __future__ import annotations

import functools
import inspect
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch import nn

from utils.errors import ModelContractError
from utils.ops import describe_value
from utils.settings import Rule, Settings, setting

TENSOR_OUTPUT = "logits"  # what the ready-made criterion, metric and Grad-CAM read
TUPLE_OUTPUT = "output_{}"
_MAPPING_ANNOTATION = re.compile(r"(typing\.|collections\.abc\.)?(dict|Dict|Mapping|MutableMapping)\b")
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _is_names(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, (list, tuple)) and bool(value)
                                      and all(isinstance(item, str) for item in value))


def _is_inputs_rule(value: Any) -> bool:
    return _is_names(value) or (isinstance(value, dict) and bool(value)
                                and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()))


@dataclass(frozen=True)
class ModelCallSettings(Settings):
    """How a plain model (tensors in, tensors out) is called and its outputs named; docs/your_project.md."""

    model_inputs: Any = setting(None, Rule("an input key, a list of keys or a dict {argument: key}", _is_inputs_rule),
                                "which of the datapoint's inputs a plain model's forward is given, by position (a "
                                "key, a list of keys) or by keyword; by default those named like its parameters, "
                                "else the only one",
                                see="[your_project.md](your_project.md#your-model-as-it-is)")
    model_outputs: Any = setting(None, Rule("a name or a list of names", _is_names),
                                 "the names of a plain model's outputs; by default a tensor is 'logits', a tuple's "
                                 "'output_0', 'output_1', ...",
                                 see="[your_project.md](your_project.md#your-model-as-it-is)")

    @property
    def output_names(self) -> Optional[tuple[str, ...]]:
        if self.model_outputs is None:
            return None
        return (self.model_outputs,) if isinstance(self.model_outputs, str) else tuple(self.model_outputs)


def takes_inputs_dict(model: nn.Module) -> bool:
    """Whether ``model.forward`` takes Lantern's ``inputs`` dict: its first parameter is annotated as a mapping, or
    is named ``inputs`` and not annotated."""
    parameters = _positional(model)
    if not parameters:
        return False
    first = parameters[0]
    if first.annotation is inspect.Parameter.empty:
        return first.name == "inputs"
    return _is_mapping_annotation(first.annotation)


def as_lantern_model(model: nn.Module, settings: ModelCallSettings, first_inputs: Any = None) -> nn.Module:
    """``model`` itself where it follows Lantern's contract, else a ``PlainModel`` around it; ``first_inputs``: the
    ``inputs`` of the evaluated dataset's first datapoint, to check the call on at once."""
    if settings.model_inputs is None and settings.model_outputs is None and takes_inputs_dict(model):
        return model
    plain = _adapter_named_as(type(model))(model, settings)
    if isinstance(first_inputs, Mapping):
        plain.call_for(first_inputs)
    return plain


class PlainModel(nn.Module):
    """A plain model under Lantern's contract, ``forward(inputs: dict) -> dict``, with the plain model's own module
    tree: children, parameters and buffers are the same objects under the same names (shared, not copied), and its
    training mode, state_dict and device moves are the plain model's own."""

    def __init__(self, model: nn.Module, settings: ModelCallSettings) -> None:
        self.__dict__["_plain"] = model  # before nn.Module's set-up, which sets ``training`` (the plain model's)
        mode = model.training
        super().__init__()
        model.training = mode
        self.__dict__.update(_parameters=model._parameters, _buffers=model._buffers, _modules=model._modules,
                             _non_persistent_buffers_set=model._non_persistent_buffers_set)
        self._settings = settings
        self._signature = _signature(model)
        self._whole = settings.model_inputs is None and takes_inputs_dict(model)  # only its outputs are named
        self._calls: dict[tuple[str, ...], _Call] = {}  # by the sorted input keys: decided once per set of keys

    @property
    def plain(self) -> nn.Module:
        """The user's model, as the config built it."""
        return self.__dict__["_plain"]

    @property
    def training(self) -> bool:  # the plain model's own flag: its forward may read self.training
        return self.plain.training

    @training.setter
    def training(self, mode: bool) -> None:
        self.plain.training = mode

    def forward(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        call = self.call_for(inputs)
        if call.whole:
            return self.named_outputs(self.plain(inputs))
        args = [inputs[key] for key in call.positional]
        kwargs = {argument: inputs[key] for argument, key in call.keywords.items()}
        return self.named_outputs(self.plain(*args, **kwargs))

    def call_for(self, inputs: Any) -> _Call:
        """How the plain model is called on ``inputs`` (decided and checked on the first inputs with these keys)."""
        if not isinstance(inputs, Mapping):
            raise ModelContractError(f"{self._name()} is given the datapoint's inputs dict, got "
                                     f"{describe_value(inputs)}; datapoints hold their inputs as a dict "
                                     "(docs/your_project.md, 'The dataset')")
        keys = tuple(sorted(map(str, inputs)))
        if keys not in self._calls:
            self._calls[keys] = self._decide(keys)
        return self._calls[keys]

    def describe(self) -> str:
        """How it is called and its outputs named, for the run's log."""
        given = "; ".join(f"given {call.describe()}" for call in self._calls.values()) or "its inputs decided at " \
            "the first batch"
        names = self._settings.output_names
        outputs = f"its outputs named {list(names)}" if names is not None else \
            f"a tensor output named '{TENSOR_OUTPUT}', a tuple's '{TUPLE_OUTPUT.format(0)}', ..., a dict's as they are"
        return f"{given}, {outputs} (config['model_inputs'], config['model_outputs'])"

    def named_outputs(self, output: Any) -> dict[str, Any]:
        """The plain model's ``output`` as named outputs (see the module's docstring)."""
        names = self._settings.output_names
        if isinstance(output, Mapping):
            if names is not None:
                raise ModelContractError(
                    f"{self._name()} returns named outputs already ({sorted(map(str, output))}); remove "
                    "config['model_outputs'], which names a tensor or tuple output")
            return dict(output.items())
        if isinstance(output, torch.Tensor):
            output, names = (output,), names or (TENSOR_OUTPUT,)
        if not isinstance(output, (tuple, list)):
            raise ModelContractError(
                f"{self._name()}.forward returned {describe_value(output)}; Lantern takes a tensor, a tuple of "
                "them or a dict (a Hugging Face ModelOutput) as a model's outputs")
        names = names or tuple(TUPLE_OUTPUT.format(i) for i in range(len(output)))
        if len(names) != len(output):
            raise ModelContractError(
                f"{self._name()}.forward returned {len(output)} output(s) but config['model_outputs'] names "
                f"{len(names)} ({list(names)}); give one name per output")
        return dict(zip(names, output))

    def _decide(self, keys: tuple[str, ...]) -> _Call:
        if self._whole:
            return _Call((), {}, whole=True)
        call = self._from_config(keys) if self._settings.model_inputs is not None else self._by_rule(keys)
        if self._signature is not None:
            try:
                self._signature.bind(*call.positional, **call.keywords)
            except TypeError as exc:
                raise ModelContractError(
                    f"{self._name()}.forward{self._signature} cannot be called with {call.describe()} ({exc}); "
                    f"the datapoint's inputs are {list(keys)}: {_SET_INPUTS}") from None
        return call

    def _from_config(self, keys: tuple[str, ...]) -> _Call:
        wanted = self._settings.model_inputs
        if isinstance(wanted, dict):
            call = _Call((), dict(wanted))
        else:
            call = _Call((wanted,) if isinstance(wanted, str) else tuple(wanted), {})
        missing = [key for key in (*call.positional, *call.keywords.values()) if key not in keys]
        if missing:
            raise ModelContractError(f"config['model_inputs'] names the input(s) {missing}, but the datapoint's "
                                     f"inputs are {list(keys)}; name one of those")
        return call

    def _by_rule(self, keys: tuple[str, ...]) -> _Call:
        parameters = self._signature.parameters if self._signature is not None else {}
        by_name = [key for key in keys if key in parameters
                   and parameters[key].kind is not inspect.Parameter.POSITIONAL_ONLY]
        if by_name:
            return _Call((), {key: key for key in by_name})
        if len(keys) == 1:
            return _Call(keys, {})
        raise ModelContractError(
            f"{self._name()}.forward{self._signature or '(...)'} takes tensors, and the datapoint has several inputs "
            f"{list(keys)}, none named like its parameters: {_SET_INPUTS}")

    def _name(self) -> str:
        return f"config['model'] ({type(self.plain).__name__})"

    def _get_name(self) -> str:
        return self.plain._get_name()

    def train(self, mode: bool = True) -> PlainModel:
        self.plain.train(mode)
        return self

    def _apply(self, fn: Any, recurse: bool = True) -> PlainModel:
        self.plain._apply(fn, recurse)
        return self

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self.plain.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False) -> Any:
        return self.plain.load_state_dict(state_dict, strict=strict, assign=assign)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:  # an attribute of the plain model that is no submodule, parameter or buffer
            if "_plain" not in self.__dict__:  # not set up yet (a copy being made)
                raise
            return getattr(self.__dict__["_plain"], name)


_SET_INPUTS = ("set config['model_inputs'] to the input to pass (a key), the inputs by position (a list of keys) or "
               "by keyword ({argument: key}); see docs/your_project.md, 'Your model as it is'")


@dataclass(frozen=True)
class _Call:
    """Which inputs a plain model is given: by position (their keys), and by keyword ({argument: key}); or the
    inputs dict itself."""

    positional: tuple[str, ...]
    keywords: dict[str, str]
    whole: bool = False  # the inputs dict itself (a model that takes it, whose outputs alone are named)

    def describe(self) -> str:
        if self.whole:
            return "the inputs dict"
        parts = [f"inputs[{key!r}]" for key in self.positional]
        parts += [f"{argument}=inputs[{key!r}]" for argument, key in self.keywords.items()]
        return ", ".join(parts)


@functools.cache
def _adapter_named_as(model_class: type) -> type[PlainModel]:
    """``PlainModel`` under the plain model's class name: messages that name the model's type (an unknown layer, a
    checkpoint that does not fit, the model report) name the user's class."""
    return type(model_class.__name__, (PlainModel,), {"__module__": PlainModel.__module__,
                                                      "__qualname__": f"PlainModel[{model_class.__qualname__}]"})


def _signature(model: nn.Module) -> Optional[inspect.Signature]:
    try:
        return inspect.signature(model.forward)
    except (TypeError, ValueError):  # a forward in C, or one that hides its signature
        return None


def _positional(model: nn.Module) -> list[inspect.Parameter]:
    signature = _signature(model)
    return [p for p in signature.parameters.values() if p.kind in _POSITIONAL] if signature is not None else []


def _is_mapping_annotation(annotation: Any) -> bool:
    """``dict``, ``dict[str, Tensor]``, ``Mapping``, ... as a type or as the string of a postponed annotation."""
    if isinstance(annotation, str):
        return _MAPPING_ANNOTATION.match(annotation.strip().strip("'\"")) is not None  # a quoted one, postponed
    origin = typing.get_origin(annotation) or annotation
    return isinstance(origin, type) and issubclass(origin, Mapping) and not issubclass(origin, Sequence)
