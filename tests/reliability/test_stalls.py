"""Stalls end and say so, in real ``main.py`` runs with a short ``stall_timeout_s`` and a generous test timeout.

A debugger that waits forever inside its call ends the run with a clear error naming it, its phase and where
it waits, logged early, leaving a state the same command resumes. A page write that hangs (a hung disk) is
logged early with the writer's stack, capture stops for that epoch, and training goes on; the messages name
the epoch that stalled.
"""

from __future__ import annotations

import json
import os
import re
import signal

import pytest

from debuggers.pages.index import read_index
from debuggers.pages.watchdog import DebuggerStallError
from runners.config_file import load_config
from runners.trainers import BaseTrainer
from tests.runs import run_main, write_config

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

COMMON = """
import os
import threading

from debuggers.base_debugger import BaseDebugger

PROGRESS = os.path.join(config["work_dir"], "progress.json")
STALL = os.environ.get("LANTERN_TEST_STALL") == "1"


def after_epoch_0():
    return STALL and os.path.exists(PROGRESS)


class ImageMean(BaseDebugger):
    def __call__(self, datapoint, model):
        if WAIT_IN_DEBUGGER and after_epoch_0():
            threading.Event().wait()  # waits forever
        return {"mean": datapoint["inputs"]["image"].mean(dim=(1, 2, 3))}


config["debugger"] = {"class": SequentialDebugger, "args": {
    "page_size_mb": 0.0001, "stall_timeout_s": 4,
    "debuggers_config": [{"name": "image_mean", "debugger_config": {"class": ImageMean, "args": {}}}]}}
"""
HUNG_DISK = """
from debuggers.pages import file_format as page_format

_append = page_format._append  # the lowest page write


def append_on_a_hung_disk(file, buffers):
    if after_epoch_0():
        threading.Event().wait()  # the disk never answers
    return _append(file, buffers)


page_format._append = append_on_a_hung_disk
"""


def config_path(tmp_path, wait_in_debugger, extra=""):
    return write_config(tmp_path / "run.py", tmp_path / "run", epochs=2, checkpoint_method="all", train_size=16,
                        val_size=8, val_batch=4,
                        extra=f"WAIT_IN_DEBUGGER = {wait_in_debugger}\n" + COMMON + extra)


def stalled_run(path, sigint=signal.SIG_DFL):
    """The run, with SIGINT as the parent leaves it (``SIG_IGN``: started in the background by a script)."""
    return run_main(path, timeout=200, env=dict(os.environ, LANTERN_TEST_STALL="1"),
                    preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))


def log_of(tmp_path):
    with open(tmp_path / "run" / "train.log") as f:
        return f.read()


def completed_epochs(tmp_path):
    with open(tmp_path / "run" / "progress.json") as f:
        return json.load(f)["completed_epochs"]


@pytest.mark.parametrize("sigint", [signal.SIG_DFL, signal.SIG_IGN], ids=["sigint-default", "sigint-ignored"])
def test_a_debugger_waiting_forever_ends_the_run_clearly_and_the_same_command_resumes(tmp_path, sigint):
    path = config_path(tmp_path, wait_in_debugger=True)
    result = stalled_run(path, sigint)
    assert result.returncode == 2, result.stderr
    assert "debugger 'image_mean' (its call on a batch) made no progress for 4 s" in result.stderr
    assert "threading.Event().wait()  # waits forever" in result.stderr  # the stack shows where it waits
    assert "stall_timeout_s" in result.stderr and "run the same command again" in result.stderr
    assert "Traceback" not in result.stderr
    log = log_of(tmp_path)
    early, stopped = re.search(r"has made no progress for \d+ s", log).start(), log.index("stopping the run")
    assert early < stopped and "debugger 'image_mean'" in log[early - 200:early]
    assert completed_epochs(tmp_path) == 1  # epoch 0 is done and kept; epoch 1 is redone
    resumed = run_main(path)
    assert resumed.returncode == 0, resumed.stderr
    assert completed_epochs(tmp_path) == 2
    assert read_index(str(tmp_path / "run" / "epoch_1" / "debugger" / "index.json"))["complete"]


def test_a_hung_page_write_is_logged_early_capture_stops_for_that_epoch_and_training_goes_on(tmp_path):
    result = stalled_run(config_path(tmp_path, wait_in_debugger=False, extra=HUNG_DISK))
    assert result.returncode == 0, result.stderr
    assert completed_epochs(tmp_path) == 2
    log = log_of(tmp_path)
    warning = log[log.index("the page writer of "):]
    assert warning.startswith(f"the page writer of {tmp_path / 'run' / 'epoch_1' / 'debugger'} (")
    assert re.search(r"has made no progress for \d+ s; the page writer gives up", warning.splitlines()[0])
    assert "thread lantern-page-writer" in warning and "threading.Event().wait()  # the disk never answers" in warning
    failures = [line for line in log.splitlines() if "cannot be written" in line or "are incomplete" in line]
    assert failures and all("epoch_1" in line and "epoch_0" not in line for line in failures)
    assert read_index(str(tmp_path / "run" / "epoch_0" / "debugger" / "index.json"))["complete"]
    assert not read_index(str(tmp_path / "run" / "epoch_1" / "debugger" / "index.json"))["complete"]


HUNG_CAPTURE_DISK = """
from debuggers.pages import file_format as page_format

_append = page_format._append


def append_on_a_hung_disk(file, buffers):
    if STALL and "datapoints" in file.name:
        threading.Event().wait()  # the disk under the captured inputs never answers
    return _append(file, buffers)


page_format._append = append_on_a_hung_disk
"""


def test_a_hung_datapoint_capture_follows_stall_timeout_s_and_is_not_retried_at_later_epochs(tmp_path):
    """The capture of the viewer's inputs waits ``stall_timeout_s`` (4 s here), not a fixed minute, once; its
    writer is then stuck, and the later epochs capture nothing rather than wait on the hung disk again. The
    debug pages, on another folder, are written every epoch."""
    path = write_config(tmp_path / "run.py", tmp_path / "run", epochs=3, checkpoint_method="all", train_size=16,
                        val_size=8, val_batch=4, extra="WAIT_IN_DEBUGGER = False\n" + COMMON + HUNG_CAPTURE_DISK)
    result = stalled_run(path)
    assert result.returncode == 0, result.stderr
    assert completed_epochs(tmp_path) == 3
    failures = [line for line in log_of(tmp_path).splitlines() if "Datapoint capture in" in line]
    assert len(failures) == 1, failures
    assert "made no progress for 4 s or more" in failures[0] and "captures nothing more in this run" in failures[0]
    for epoch in range(3):
        assert read_index(str(tmp_path / "run" / f"epoch_{epoch}" / "debugger" / "index.json"))["complete"]


FORWARD_HOOK_WAITS = """
import threading

from debuggers.forward_debugger import ForwardDebugger


class WaitingHook(ForwardDebugger):
    def process_forward(self, module, input, output):
        threading.Event().wait()  # a hook that never returns


config["debugger"] = {"class": SequentialDebugger, "args": {"stall_timeout_s": 2, "debuggers_config": [
    {"name": "waiting_hook", "debugger_config": {"class": WaitingHook, "args": {"layer_name": "backbone.layer1"}}}]}}
"""


def test_a_forward_hook_waiting_forever_ends_the_run_with_an_error_naming_it(tmp_path):
    """In this process: the watchdog interrupts the main thread inside the model's forward pass."""
    path = write_config(tmp_path / "run.py", tmp_path / "run", epochs=1, train_size=16, val_size=4,
                        extra=FORWARD_HOOK_WAITS)
    with pytest.raises(DebuggerStallError) as raised:
        BaseTrainer(load_config(path)).run()
    message = str(raised.value)
    assert "the model's forward pass with the hooks of forward debuggers ['waiting_hook']" in message
    assert "threading.Event().wait()  # a hook that never returns" in message
    assert not os.path.exists(tmp_path / "run" / "progress.json")  # the epoch is not marked done
