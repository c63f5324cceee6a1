"""Typed settings (``utils/settings.py``): a section's forms (True, False, None, a dict), top-level keys, and the
one error form for a bad value, an unknown setting or a missing one."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from utils.errors import ConfigError
from utils.settings import POSITIVE_NUMBER, REQUIRED, TEXT, ConfigKey, Settings, one_of, setting, whole_number


@dataclass(frozen=True)
class Probe(Settings):
    KEY = "probe"
    DOC = "a probe"
    ON_BY_DEFAULT = True

    every: int = setting(10, whole_number(1, 100_000), "how often it probes")
    mode: str = setting("a", one_of("a", "b"), "how it probes")


@dataclass(frozen=True)
class Named(Settings):
    KEY = "named"
    SWITCHED = False

    name: str = setting(REQUIRED, TEXT, "what it is called")


@dataclass(frozen=True)
class TopLevel(Settings):
    timeout_s: float = setting(30, POSITIVE_NUMBER, "seconds to wait", identifies_run=False, see="[x](x.md)")
    budget: float = setting(None, POSITIVE_NUMBER, "gigabytes kept")


def test_a_section_is_its_defaults_when_left_out_or_true_off_when_false_and_a_dict_of_some():
    assert Probe.from_config({}) == Probe() == Probe.from_entry(True)
    assert Probe.from_entry(False) is None
    assert Probe.from_entry({"mode": "b"}) == Probe(every=10, mode="b")
    assert Named.from_entry(None) is None


@pytest.mark.parametrize("entry, message", [
    ({"every": 0}, "config['probe']['every'] must be a whole number from 1 to 100,000 (how often it probes), got 0"),
    ({"every": True}, "config['probe']['every'] must be a whole number from 1 to 100,000 (how often it probes), "
                      "got True"),
    ({"mode": "c"}, "config['probe']['mode'] must be one of ['a', 'b'] (how it probes), got 'c'"),
    ({"evrey": 3}, "config['probe'] has an unknown setting 'evrey' (did you mean 'every'?); the settings are "
                   "['every', 'mode']"),
    ("on", "config['probe'] must be True, False or a dict of settings ['every', 'mode'], got 'on'"),
])
def test_a_bad_section_is_refused_in_one_form(entry, message):
    with pytest.raises(ConfigError) as refused:
        Probe.from_entry(entry)
    assert str(refused.value) == message


def test_a_section_that_is_no_switch_needs_its_dict_and_its_required_settings():
    with pytest.raises(ConfigError, match=r"^config\['named'\] must be a dict of settings \['name'\], got True$"):
        Named.from_entry(True)
    with pytest.raises(ConfigError, match=r"^config\['named'\] lacks 'name' \(what it is called\)$"):
        Named.from_entry({})


def test_settings_built_directly_are_checked_too():
    with pytest.raises(ConfigError, match=r"config\['probe'\]\['every'\] must be"):
        Probe(every=-1)


@pytest.mark.parametrize("value", [0, -1.0, math.inf, math.nan, True, "1"])
def test_a_top_level_key_is_refused_unless_a_finite_positive_number(value):
    with pytest.raises(ConfigError) as refused:
        TopLevel.from_config({"timeout_s": value})
    assert str(refused.value) == f"config['timeout_s'] must be a positive number (seconds to wait), got {value!r}"


def test_a_top_level_key_left_out_or_none_where_none_is_its_default_is_its_default():
    assert TopLevel.from_config({"budget": None, "other": 1}) == TopLevel(timeout_s=30, budget=None)


def test_each_key_s_guide_line_says_what_it_is_for_what_it_must_be_and_its_default():
    assert TopLevel.config_keys() == (
        ConfigKey("timeout_s", "seconds to wait (a positive number, default `30`); see [x](x.md)", False),
        ConfigKey("budget", "gigabytes kept (a positive number)", True))
    [probe] = Probe.config_keys()
    assert probe.name == "probe" and probe.doc == (
        "a probe. Its settings: `every`: how often it probes (a whole number from 1 to 100,000, default `10`); "
        "`mode`: how it probes (one of ['a', 'b'], default `'a'`)")
