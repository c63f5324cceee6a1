"""Typed settings read from a run's config.

Each ``Settings`` subclass is one frozen dataclass holding where its values live in the config, their defaults,
their checks and a line saying what each is for. So a config key is read, checked and documented in one place, and
every bad value is refused in one form, naming the key, what it must be, what it is for and what it was::

    config['training_monitor']['every_n_steps'] must be a whole number from 1 to 100,000 (a row of norms every that
    many training steps), got 'x'

A class with a ``KEY`` reads the dict at ``config[KEY]`` (a section, such as ``config['training_monitor']``); one
without reads each of its fields as a top-level key. ``config_keys()`` gives the guide's line of each key it reads.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, ClassVar, NamedTuple, Optional, Self

from utils.config_values import is_positive_number
from utils.errors import ConfigError

REQUIRED: Any = MISSING  # the default of a setting the config must give


@dataclass(frozen=True)
class Rule:
    """What a value must be: ``expected`` ends "must be ..." in the error, ``accepts`` decides."""

    expected: str
    accepts: Callable[[Any], bool]


def is_whole_number(value: Any) -> bool:
    """An int (``True`` is not one here, though Python says it is 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def whole_number(low: int = 1, high: Optional[int] = None) -> Rule:
    """A whole number from ``low`` (to ``high``)."""
    expected = (f"a whole number from {low:,} to {high:,}" if high is not None
                else "a positive whole number" if low == 1 else f"a whole number of at least {low:,}")
    return Rule(expected, lambda value: is_whole_number(value) and value >= low and (high is None or value <= high))


def one_of(*choices: str) -> Rule:
    return Rule(f"one of {list(choices)}", lambda value: isinstance(value, str) and value in choices)


POSITIVE_NUMBER = Rule("a positive number", is_positive_number)
BOOLEAN = Rule("True or False", lambda value: isinstance(value, bool))
TEXT = Rule("a string", lambda value: isinstance(value, str))
FRACTION = Rule("a number strictly between 0 and 1",
                lambda value: isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1)


def setting(default: Any, rule: Rule, doc: str, *, identifies_run: bool = True, see: str = "") -> Any:
    """A field of a ``Settings`` class. ``default``: its value when the config leaves it out (``REQUIRED``: it may
    not; None: it may also be None); ``doc``: what it is for, in its error and in the guide; ``identifies_run``:
    for a top-level key, whether a changed value makes another run; ``see``: the guide's pointer to more."""
    return field(default=default, metadata={"rule": rule, "doc": doc, "identifies_run": identifies_run, "see": see})


class ConfigKey(NamedTuple):
    """A top-level config key: its name, the guide's line for it, and whether changing it makes another run (a run
    resumed with it changed is the same run: it changes what is captured and how, not what is trained)."""

    name: str
    doc: str
    identifies_run: bool = True


@dataclass(frozen=True)
class Settings:
    """Base of typed settings; see the module's docstring. Fields are declared with ``setting``."""

    KEY: ClassVar[Optional[str]] = None  # the section's config key; None: each field is a top-level key
    DOC: ClassVar[str] = ""  # a section's line in the guide
    SEE: ClassVar[str] = ""
    IDENTIFIES_RUN: ClassVar[bool] = True  # a section's
    ON_BY_DEFAULT: ClassVar[bool] = False  # a section the config leaves out (or None): its defaults, else off
    SWITCHED: ClassVar[bool] = True  # True or False in place of a section's dict: its defaults, or off

    def __post_init__(self) -> None:
        for spec in fields(self):
            value, rule = getattr(self, spec.name), spec.metadata["rule"]
            if not (value is None and spec.default is None) and not rule.accepts(value):
                raise ConfigError(f"{self.where()}['{spec.name}'] must be {rule.expected} ({spec.metadata['doc']}), "
                                  f"got {value!r}")

    @classmethod
    def where(cls) -> str:
        return "config" if cls.KEY is None else f"config['{cls.KEY}']"

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Optional[Self]:
        """These settings as a run's whole ``config`` gives them; None for a section that is off."""
        return cls._read(config) if cls.KEY is None else cls.from_entry(config.get(cls.KEY))

    @classmethod
    def from_entry(cls, entry: Any) -> Optional[Self]:
        """A section's settings from ``config[KEY]``: None, True or False (where ``SWITCHED``), or a dict of some
        of them; None when the section is off."""
        if entry is None:
            return cls() if cls.ON_BY_DEFAULT else None
        if cls.SWITCHED and isinstance(entry, bool):
            return cls() if entry else None
        names = [spec.name for spec in fields(cls)]
        if not isinstance(entry, dict):
            raise ConfigError(f"{cls.where()} must be {'True, False or ' if cls.SWITCHED else ''}a dict of settings "
                              f"{names}, got {entry!r}")
        for key in entry:
            if key not in names:
                close = difflib.get_close_matches(str(key), names, n=1)
                raise ConfigError(f"{cls.where()} has an unknown setting {key!r}"
                                  f"{f' (did you mean {close[0]!r}?)' if close else ''}; the settings are {names}")
        return cls._read(entry)

    @classmethod
    def _read(cls, values: Mapping[str, Any]) -> Self:
        for spec in fields(cls):
            if spec.name not in values and spec.default is REQUIRED:
                raise ConfigError(f"{cls.where()} lacks '{spec.name}' ({spec.metadata['doc']})")
        return cls(**{spec.name: values[spec.name] for spec in fields(cls) if spec.name in values})

    @classmethod
    def config_keys(cls) -> tuple[ConfigKey, ...]:
        """The top-level keys these settings are read from, each with its line in the guide."""
        if cls.KEY is None:
            return tuple(ConfigKey(spec.name, _described(spec), spec.metadata["identifies_run"])
                         for spec in fields(cls))
        settings = "; ".join(f"`{spec.name}`: {_described(spec)}" for spec in fields(cls))
        return (ConfigKey(cls.KEY, f"{cls.DOC}. Its settings: {settings}{f'; see {cls.SEE}' if cls.SEE else ''}",
                          cls.IDENTIFIES_RUN),)


def _described(spec: Field) -> str:
    """A setting's line: what it is for, what it must be, its default, where to read more."""
    default = "" if spec.default in (REQUIRED, None, ()) else f", default `{spec.default!r}`"
    see = spec.metadata["see"]
    return f"{spec.metadata['doc']} ({spec.metadata['rule'].expected}{default}){f'; see {see}' if see else ''}"
