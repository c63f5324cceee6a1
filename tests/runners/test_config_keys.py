"""The config keys, declared once (``runners/config_keys.py``): the guide's table is theirs, which keys identify a run
follows from them, and each runner's settings refuse a bad value in the one form of ``utils/settings.py``."""

from __future__ import annotations

import math
import os
import re

import pytest

from debuggers.training_monitor import MonitorSettings
from runners.config_keys import (
    COMMON,
    EVALUATOR_ONLY,
    TRAINER_ONLY,
    UNIDENTIFYING_KEYS,
    RunnerSettings,
    TrainerSettings,
    markdown_table,
)
from runners.datapoint_capture import CaptureLimits
from runners.hooks import DiskBudgetSettings, FindingsSettings
from tests.runs import REPO_ROOT
from utils.errors import ConfigError


def test_the_guide_s_table_of_keys_is_the_one_the_keys_give():
    with open(os.path.join(REPO_ROOT, "docs", "guide.md"), encoding="utf-8") as guide:
        text = guide.read()
    start = text.index("| key | meaning |")
    table = text[start:text.index("\n\n", start)]
    assert table == markdown_table(), "update the table in docs/guide.md from `python -m runners.config_keys`"


def test_each_key_is_declared_once_and_documented():
    names = [key.name for key in COMMON + TRAINER_ONLY + EVALUATOR_ONLY]
    assert len(names) == len(set(names))
    assert all(key.doc for key in COMMON + TRAINER_ONLY + EVALUATOR_ONLY)


def test_what_is_captured_and_how_a_run_is_read_do_not_identify_it():
    assert set(UNIDENTIFYING_KEYS) == {"work_dir", "config_filepath", "distributed_timeout_s", "datapoint_capture",
                                       "debug_disk_budget_gb", "training_monitor", "failure_definition",
                                       "failure_analysis", "profiler"}


@pytest.mark.parametrize("settings, key, value, expected", [
    (RunnerSettings, "distributed_timeout_s", math.inf, "a positive number"),
    (RunnerSettings, "hooks", {"class": dict}, "a list of {'class': ..., 'args': {...}} entries"),
    (TrainerSettings, "epochs", 0, "a positive whole number"),
    (TrainerSettings, "checkpoint_method", 1.5, "'latest', 'all' or a positive whole number N"),
    (FindingsSettings, "failure_analysis", "yes", "True or False"),
    (DiskBudgetSettings, "debug_disk_budget_gb", math.nan, "a positive number"),
])
def test_a_bad_top_level_value_is_refused_in_the_one_form(settings, key, value, expected):
    with pytest.raises(ConfigError) as refused:
        settings.from_config({"epochs": 1, key: value})
    assert re.fullmatch(rf"config\['{key}'\] must be {re.escape(expected)} \(.+\), got {re.escape(repr(value))}",
                        str(refused.value)), str(refused.value)


@pytest.mark.parametrize("settings, key, setting, value, expected", [
    (CaptureLimits, "datapoint_capture", "max_total_mb", -1, "a positive number"),
    (MonitorSettings, "training_monitor", "every_n_steps", "x", "a whole number from 1 to 100,000"),
])
def test_a_bad_section_value_is_refused_in_the_one_form(settings, key, setting, value, expected):
    with pytest.raises(ConfigError) as refused:
        settings.from_config({key: {setting: value}})
    assert re.fullmatch(rf"config\['{key}'\]\['{setting}'\] must be {re.escape(expected)} \(.+\), got "
                        rf"{re.escape(repr(value))}", str(refused.value)), str(refused.value)
