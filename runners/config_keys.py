"""Every top-level config key, in one place: which runner reads it, what it is for, whether changing it makes another
run, and, for the keys with typed settings (``utils/settings.py``), their defaults and checks.

A key no runner reads is a typo (stopped, with the closest names), and another runner's key is ignored (said in
the log). The guide's table of keys (docs/guide.md, "The config format") is this module's output:
``python -m runners.config_keys`` prints it, and a test holds the guide to it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from debuggers.training_monitor import MonitorSettings
from runners.datapoint_capture import CaptureLimits
from runners.failure_definition import FailureDefinitionSettings
from runners.hooks.disk_budget import DiskBudgetSettings
from runners.hooks.findings import FindingsSettings
from runners.hooks.profiler import ProfilerSettings
from runners.overfit import OverfitSettings
from runners.plain_model import ModelCallSettings
from runners.training_step import TrainingStepSettings
from utils.distributed import DEFAULT_TIMEOUT_S
from utils.errors import ConfigError
from utils.settings import POSITIVE_NUMBER, REQUIRED, ConfigKey, Rule, Settings, is_whole_number, setting, whole_number

TRAINER, EVALUATOR = "BaseTrainer", "BaseEvaluator"
CHECKPOINT_METHOD = Rule("'latest', 'all' or a positive whole number N",
                         lambda value: value in ("latest", "all") or (is_whole_number(value) and value > 0))
ENTRIES = Rule("a list of {'class': ..., 'args': {...}} entries", lambda value: isinstance(value, (list, tuple)))


@dataclass(frozen=True)
class RunnerSettings(Settings):
    """The top-level settings every runner reads."""

    distributed_timeout_s: float = setting(
        DEFAULT_TIMEOUT_S, POSITIVE_NUMBER, "seconds a rank waits for the others under torchrun before giving up",
        identifies_run=False, see="[distributed.md](distributed.md)")
    hooks: tuple = setting((), ENTRIES, "your own hooks, each a RunnerHook subclass, called after the built-in ones",
                           see="[Your own hooks](#your-own-hooks)")


@dataclass(frozen=True)
class TrainerSettings(Settings):
    """The top-level settings of a trainer's loop."""

    epochs: int = setting(REQUIRED, whole_number(1), "the number of epochs to train")
    checkpoint_method: Any = setting("latest", CHECKPOINT_METHOD, "which epochs keep a checkpoint and get debug "
                                     "outputs: the last, all, or every N-th and the last")


def _keys(*parts: ConfigKey | type[Settings]) -> tuple[ConfigKey, ...]:
    return tuple(key for part in parts
                 for key in (part.config_keys() if isinstance(part, type) else (part,)))


COMMON = _keys(
    ConfigKey("runner", "`BaseTrainer` or `BaseEvaluator` (or a subclass)"),
    ConfigKey("work_dir", "where results go; default `logs/<config path under configs/ without .py>` for Lantern's "
                          "configs, `logs/<project folder>/<config name>` for a project's (see "
                          "[your_project.md](your_project.md))", identifies_run=False),
    ConfigKey("config_filepath", "set by `main.py`: the config file the run was started from, recorded in "
                                 "`run_info.json` (`--verify` rebuilds the model from it)", identifies_run=False),
    ConfigKey("seed", "base seed (default 0); model init, shuffling and dropout derive from it per epoch"),
    ConfigKey("device", "`'cpu'` (default) or `'cuda'`; without CUDA the run warns and uses the CPU"),
    ConfigKey("model", "an `nn.Module` entry: `forward(inputs: dict) -> dict`, or a plain model that takes tensors "
                       "and returns a tensor, a tuple or a Hugging Face `ModelOutput` (see "
                       "[your_project.md](your_project.md#your-model-as-it-is))"),
    ModelCallSettings,
    ConfigKey("metric", "per-datapoint scores, e.g. `ClassificationMetric`"),
    ConfigKey("debugger", "optional `SequentialDebugger` entry, see [debugger.md](debugger.md) (what to keep: its "
                          "`keep` and `summaries_every_epoch`)"),
    RunnerSettings, CaptureLimits, FailureDefinitionSettings, FindingsSettings,
)
TRAINER_ONLY = _keys(
    TrainerSettings,
    ConfigKey("best_metric", "aggregated score that decides the best epoch (default: the metric's first)"),
    ConfigKey("train_dataset", "the dataset entry trained on"),
    ConfigKey("train_dataloader", "a `torch.utils.data.DataLoader` entry without dataset, sampler or shuffle"),
    ConfigKey("val_dataset", "the dataset entry validated after each epoch"),
    ConfigKey("val_dataloader", "as `train_dataloader`, for the validation"),
    ConfigKey("criterion", "`criterion(outputs, labels) -> loss`"),
    ConfigKey("optimizer", "a `torch.optim` entry (the runner adds the model's parameters)"),
    ConfigKey("scheduler", "optional `torch.optim.lr_scheduler` entry, stepped once per epoch"),
    TrainingStepSettings, OverfitSettings, DiskBudgetSettings, MonitorSettings, ProfilerSettings,
)
EVALUATOR_ONLY = _keys(
    ConfigKey("checkpoint", "a `checkpoint.pt`, or a trainer work dir (its best epoch's)"),
    ConfigKey("eval_dataset", "the dataset entry evaluated"),
    ConfigKey("eval_dataloader", "as `train_dataloader`, for the evaluation"),
)

COMMON_KEYS = tuple(key.name for key in COMMON)
TRAINER_KEYS = tuple(key.name for key in TRAINER_ONLY)
EVALUATOR_KEYS = tuple(key.name for key in EVALUATOR_ONLY)
RUNNER_KEYS = {TRAINER: TRAINER_KEYS, EVALUATOR: EVALUATOR_KEYS}
# changing one of these keeps a run the same run: they change what is captured and how it is read, not what is
# trained (a run the monitor stopped at a NaN resumes with it set to go on)
UNIDENTIFYING_KEYS = tuple(key.name for key in COMMON + TRAINER_ONLY + EVALUATOR_ONLY if not key.identifies_run)


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


def markdown_table() -> str:
    """The guide's table of config keys."""
    rows = ["| key | meaning |", "| --- | --- |"]
    for reader, keys in (("", COMMON), ("trainer: ", TRAINER_ONLY), ("evaluator: ", EVALUATOR_ONLY)):
        rows += [f"| `{key.name}` | {reader}{key.doc} |" for key in keys]
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
