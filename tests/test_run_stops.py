"""Every stop of a real ``main.py`` process, caught by Lantern or not, ends the run's log with what stopped it,
during which stage and what to do, and exits non-zero: the project's code raising mid-epoch (traceback on stderr
and in the log, exit code 1), an error building a config entry or reading ``dataset[0]`` (one line naming the
entry, the traceback in the log, exit code 2), a metric returning strings (stopped at its first batch, before any
training), Ctrl-C and SIGTERM."""

from __future__ import annotations

import re
import signal

import pytest

from tests.runs import run_main, start_main, write_config

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

# the project's model raises in the second epoch's training (the first one is done once progress.json exists) or
# in validation: its own code, which Lantern does not catch (a dataset's error is caught and named in one line:
# tests/runners/test_datapoint_errors.py)
IN_EPOCH_1 = """
import os

PROGRESS = os.path.join(config["work_dir"], "progress.json")


class Flaky{kind}(SmallCNN):
    def forward(self, inputs):
        if {when}:
            raise ValueError("planted failure in the model")
        return super().forward(inputs)


config["model"]["class"] = Flaky{kind}
"""
STRICT_DEBUGGER = """
from debuggers.base_debugger import BaseDebugger


class Flaky(BaseDebugger):
    def __call__(self, datapoint, model):
        raise RuntimeError("planted failure in a debugger")


config["debugger"] = {"class": SequentialDebugger, "args": {"strict": True, "debuggers_config": [
    {"name": "flaky", "debugger_config": {"class": Flaky, "args": {}}}]}}
"""


def last_lines(log_path, count: int = 1) -> list[str]:
    with open(log_path, encoding="utf-8") as log:
        return log.read().splitlines()[-count:]


def stop_line(log_path, stage: str, code: int) -> str:
    """The message of the log's last line, which must be the stop of this process during ``stage``."""
    [last] = last_lines(log_path)
    match = re.fullmatch(rf"\d\d:\d\d:\d\d \[rank 0\] ERROR process \d+ stopped during {stage} \(exit code {code}\): "
                         r"(.*)", last)
    assert match, last
    return match.group(1)


@pytest.mark.parametrize("extra, stage, error, advice", [
    (IN_EPOCH_1.format(kind="Train", when="self.training and os.path.exists(PROGRESS)"), "epoch 1 training",
     "ValueError: planted failure in the model",
     "epoch 0 is done and saved: once fixed, the same command resumes after epoch 0"),
    (IN_EPOCH_1.format(kind="Val", when="not self.training"), "epoch 0 validation",
     "ValueError: planted failure in the model",
     "no epoch had finished: once fixed, the same command starts the run again in this work dir"),
    (STRICT_DEBUGGER, "epoch 1 validation",  # the checkpoint epoch: the last
     "DebuggerError: debugger 'flaky' failed: RuntimeError: planted failure in a debugger",
     "epoch 0 is done and saved: once fixed, the same command resumes after epoch 0"),
], ids=["model_in_epoch_1_training", "model_in_validation", "strict_debugger"])
def test_an_error_lantern_does_not_catch_ends_the_log_with_stage_traceback_and_what_to_do(tmp_path, extra, stage,
                                                                                         error, advice):
    path = write_config(tmp_path / "c.py", tmp_path / "w", epochs=2, train_size=16, val_size=8, extra=extra)
    result = run_main(path)
    assert result.returncode == 1, result.stderr
    log = tmp_path / "w" / "train.log"
    message = stop_line(log, stage, 1)
    assert message.startswith(f"{error}. Lantern did not catch this error: the traceback ends where it was raised")
    assert message.endswith(advice)
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and f'File "{path}"' in text  # down to the raising line
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.splitlines()[-1] == f"error: stopped during {stage}: {message} (also at the end of {log})"


@pytest.mark.parametrize("extra, message", [
    ("config['optimizer'] = {'class': torch.optim.Adam, 'args': {'lr': '1e-3'}}\n",
     "config['optimizer'] (Adam): TypeError: '<=' not supported between instances of 'float' and 'str'"),
    ("""
from debuggers.base_debugger import BaseDebugger


class NeedsAProbe(BaseDebugger):
    def __init__(self):
        raise FileNotFoundError("probe.json is missing")

    def __call__(self, datapoint, model):
        return {}


config["debugger"] = {"class": SequentialDebugger, "args": {"debuggers_config": [
    {"name": "fm", "debugger_config": {"class": NeedsAProbe, "args": {}}}]}}
""", "debuggers_config[0] ('fm')['debugger_config'] (NeedsAProbe): "
    "FileNotFoundError: probe.json is missing"),
    ("""
class Broken(SyntheticShapesDataset):
    def __getitem__(self, i):
        return {"inputs": self.images[i]}


config["train_dataset"]["class"] = Broken
""", "config['train_dataset'] (Broken), dataset[0]: AttributeError: 'Broken' object has no attribute 'images'"),
], ids=["optimizer_lr_as_a_string", "debugger_init_raises", "dataset_0_raises"])
def test_an_error_setting_up_a_config_entry_is_one_line_naming_it_with_the_traceback_in_the_log(tmp_path, extra,
                                                                                               message):
    path = write_config(tmp_path / "c.py", tmp_path / "w", extra=extra)
    result = run_main(path)
    assert result.returncode == 2, result.stderr
    log = tmp_path / "w" / "train.log"
    assert result.stderr.splitlines()[-1] == f"error: {message} (the traceback is in {log})"
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) < 5, result.stderr
    assert stop_line(log, "start-up", 2) == message
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "The above exception" not in text
    assert text.index("Traceback") < text.index(f"stopped during start-up (exit code 2): {message}")


FORMATTING_METRIC = """
class Formatting(ClassificationMetric):
    def __call__(self, outputs, labels):
        return {name: [f"{value:.3f}" for value in values.tolist()]
                for name, values in super().__call__(outputs, labels).items()}


config["metric"]["class"] = Formatting
"""
WITH_A_DEBUGGER = """
from debuggers.activation_stats_debugger import ActivationStatsDebugger
config["debugger"] = {"class": SequentialDebugger, "args": {"debuggers_config": [
    {"name": "stats",
     "debugger_config": {"class": ActivationStatsDebugger, "args": {"layer_name": "backbone.layer1"}}}]}}
"""
AN_EVALUATOR = """
from runners.evaluators import BaseEvaluator
config["runner"] = BaseEvaluator
config["eval_dataset"] = config.pop("val_dataset")
for key in ("train_dataset", "train_dataloader", "val_dataloader", "criterion", "optimizer", "scheduler", "epochs",
            "checkpoint_method"):
    config.pop(key)
"""


@pytest.mark.parametrize("runner, extra, stage", [
    ("trainer", "", "epoch 0 training"),
    ("trainer_with_a_debugger", WITH_A_DEBUGGER, "epoch 0 training"),
    ("evaluator", AN_EVALUATOR, "evaluation"),
], ids=["trainer", "trainer_with_a_debugger", "evaluator"])
def test_a_metric_returning_strings_stops_at_its_first_batch_naming_the_metric_and_the_score(tmp_path, runner, extra,
                                                                                             stage):
    """Before, it crashed after a whole training epoch inside Lantern (a ValueError in the capture policy with a
    debugger, an AttributeError in summarize without)."""
    path = write_config(tmp_path / "c.py", tmp_path / "w", epochs=1, train_size=16, val_size=8,
                        extra=FORMATTING_METRIC + extra)
    result = run_main(path)
    assert result.returncode == 2, result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error")]
    message = line.removeprefix("error: ")
    assert message.startswith("config['metric'] (Formatting) returned scores['accuracy'] holding a str ('"), message
    assert "which is not a number" in message and "never formatted strings" in message
    assert "Traceback" not in result.stderr
    log = tmp_path / "w" / ("eval.log" if runner == "evaluator" else "train.log")
    assert stop_line(log, stage, 2) == message
    assert not (tmp_path / "w" / "epoch_0").exists()  # no training epoch was spent (nor its losses written)
    assert not (tmp_path / "w" / "evaluation_scores.json").exists()


WAITS_IN_EPOCH_1 = """
import os
import time

OUTSIDE = os.path.dirname(config["work_dir"])
PROGRESS = os.path.join(config["work_dir"], "progress.json")


class WaitingCriterion(CrossEntropyCriterion):
    def __call__(self, outputs, labels):
        if os.path.exists(PROGRESS):
            open(os.path.join(OUTSIDE, "started"), "w").close()
            time.sleep(600)  # until the test's signal
        return super().__call__(outputs, labels)


config["criterion"] = {"class": WaitingCriterion, "args": {}}
"""


@pytest.mark.parametrize("sent, code, said", [
    (signal.SIGINT, 130, "interrupted (KeyboardInterrupt: Ctrl-C)"),
    (signal.SIGTERM, 143, "terminated by SIGTERM (a scheduler's time limit or preemption"),
], ids=["ctrl_c", "sigterm"])
def test_an_interrupted_or_terminated_run_says_so_in_its_log(tmp_path, sent, code, said):
    path = write_config(tmp_path / "run.py", tmp_path / "run", epochs=2, train_size=16, val_size=8,
                        extra=WAITS_IN_EPOCH_1)
    process = start_main(path, tmp_path / "started")
    try:
        process.send_signal(sent)
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == code, stderr
    message = stop_line(tmp_path / "run" / "train.log", "epoch 1 training", code)
    assert message.startswith(said)
    assert message.endswith("epoch 0 is done and saved: once fixed, the same command resumes after epoch 0")
    assert stderr.splitlines()[-1].startswith(f"error: stopped during epoch 1 training: {said}")
