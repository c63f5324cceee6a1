"""The top-level config keys each runner reads: any other key is a typo (stopped, with the closest names), and
another runner's key is ignored (said in the log)."""

from __future__ import annotations

import difflib
from typing import Any

from utils.errors import ConfigError

COMMON_KEYS = ("runner", "work_dir", "config_filepath", "seed", "device", "distributed_timeout_s",
               "datapoint_capture", "model", "metric", "debugger", "failure_definition")
TRAINER_KEYS = ("epochs", "checkpoint_method", "best_metric", "train_dataset", "train_dataloader", "val_dataset",
                "val_dataloader", "criterion", "optimizer", "scheduler", "debug_disk_budget_gb", "training_monitor")
EVALUATOR_KEYS = ("checkpoint", "eval_dataset", "eval_dataloader")
RUNNER_KEYS = {"BaseTrainer": TRAINER_KEYS, "BaseEvaluator": EVALUATOR_KEYS}


def check_config_keys(config: dict[str, Any], runner: str, own_keys: tuple[str, ...]) -> list[str]:
    """Raise ``ConfigError`` for a key no runner reads; return a warning per key only another runner reads."""
    known = set(COMMON_KEYS) | set(own_keys)
    everyone = known | {key for keys in RUNNER_KEYS.values() for key in keys}
    for key in config:
        if key not in everyone:
            close = difflib.get_close_matches(str(key), sorted(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"config has an unknown key {key!r}{hint}; {runner} reads {sorted(known)}. Rename "
                              "or remove it (the keys are in docs/guide.md, 'The config format')")
    return [f"config key {key!r} is read by {_reader(key)} only; {runner} ignores it: remove it"
            for key in config if key not in known]


def _reader(key: str) -> str:
    return " and ".join(runner for runner, keys in RUNNER_KEYS.items() if key in keys)
