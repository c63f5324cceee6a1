"""The work dir in real ``main.py`` processes: a second copy of a running command is refused naming the holder,
and a work dir deleted during training stops the run with a clear error instead of a success over a broken folder.
"""

from __future__ import annotations

import json
import os
import re
import socket

import pytest

from runners.work_dir_guard import lock_work_dir, release_work_dir
from tests.runs import run_main, start_main, write_config

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

WAITS = """
import os
import time

OUTSIDE = os.path.dirname(config["work_dir"])


class WaitingCriterion(CrossEntropyCriterion):
    def __call__(self, outputs, labels):
        open(os.path.join(OUTSIDE, "started"), "w").close()
        while not os.path.exists(os.path.join(OUTSIDE, "go")):
            time.sleep(0.05)
        return super().__call__(outputs, labels)


config["criterion"] = {"class": WaitingCriterion, "args": {}}
"""
REPLACED_BY_ANOTHER_RUN = """
import os
import shutil
import subprocess
import sys

OUTSIDE = os.path.dirname(config["work_dir"])


class ReplacingCriterion(CrossEntropyCriterion):
    def __call__(self, outputs, labels):
        if not os.path.exists(os.path.join(OUTSIDE, "replaced")):
            open(os.path.join(OUTSIDE, "replaced"), "w").close()
            shutil.rmtree(config["work_dir"])  # someone deletes the run's folder and runs run B in its place
            run_b = subprocess.run([sys.executable, "main.py", "--config-filepath", os.path.join(OUTSIDE, "b.py")],
                                   capture_output=True, text=True)
            assert run_b.returncode == 0, run_b.stderr
        return super().__call__(outputs, labels)


config["criterion"] = {"class": ReplacingCriterion, "args": {}}
"""
DELETES = """
import os
import shutil

OUTSIDE = os.path.dirname(config["work_dir"])
PROGRESS = os.path.join(config["work_dir"], "progress.json")


class DeletingCriterion(CrossEntropyCriterion):
    def __call__(self, outputs, labels):
        if os.path.exists(PROGRESS) and not os.path.exists(os.path.join(OUTSIDE, "deleted")):
            open(os.path.join(OUTSIDE, "deleted"), "w").close()
            shutil.rmtree(config["work_dir"])  # someone deletes the run's folder during epoch 1
        return super().__call__(outputs, labels)


config["criterion"] = {"class": DeletingCriterion, "args": {}}
"""


def completed_epochs(work_dir):
    with open(os.path.join(work_dir, "progress.json")) as f:
        return json.load(f)["completed_epochs"]


def test_a_second_copy_of_a_running_command_is_refused_naming_the_holder(tmp_path):
    path = write_config(tmp_path / "run.py", tmp_path / "run", epochs=1, train_size=16, val_size=8, extra=WAITS)
    first = start_main(path, tmp_path / "started")
    try:
        second = run_main(path, timeout=120)
        assert second.returncode == 2
        assert f"is in use by another Lantern run (pid {first.pid} on host {socket.gethostname()}, started" \
            in second.stderr and "main.py --config-filepath" in second.stderr
        (tmp_path / "go").touch()
        assert first.wait(120) == 0, first.communicate()
    finally:
        first.kill()
        first.communicate()
    assert completed_epochs(tmp_path / "run") == 1
    log = (tmp_path / "run" / "train.log").read_text()  # the running run's: it did not stop
    assert " stopped during " not in log and log.count("is in use by another Lantern run") == 1
    assert re.search(r"\] WARNING another launch \(process \d+\) into this work dir was refused and changed "
                     r"nothing here \(exit code 2\): work dir .* is in use by another Lantern run", log), log
    lock_work_dir(str(tmp_path / "run"))  # the lock ended with its process
    release_work_dir(str(tmp_path / "run"))


def test_a_work_dir_deleted_during_training_stops_the_run_clearly(tmp_path):
    path = write_config(tmp_path / "run.py", tmp_path / "run", epochs=2, checkpoint_method="all", train_size=16,
                        val_size=8, extra=DELETES)
    result = run_main(path)
    assert result.returncode == 2, result.stderr
    assert "was deleted or replaced while this run was using it" in result.stderr
    assert "write the files of epoch 1" in result.stderr and "run the same command again" in result.stderr
    assert "Results are in" not in result.stdout
    assert not os.path.exists(tmp_path / "run")  # nothing recreated half-empty
    again = run_main(path)
    assert again.returncode == 0, again.stderr
    assert completed_epochs(tmp_path / "run") == 2


def test_a_run_whose_work_dir_became_another_runs_stops_leaving_that_run_and_its_log_alone(tmp_path):
    write_config(tmp_path / "b.py", tmp_path / "run", epochs=1, train_size=16, val_size=8)
    path = write_config(tmp_path / "a.py", tmp_path / "run", epochs=1, train_size=16, val_size=8,
                        extra=REPLACED_BY_ANOTHER_RUN)
    result = run_main(path)
    assert result.returncode == 2, result.stderr
    log = (tmp_path / "run" / "train.log").read_text()  # run B's, which finished
    assert "replaced" not in log and "ERROR" not in log and "WARNING" not in log, log
    assert completed_epochs(tmp_path / "run") == 1
    assert "was replaced while this run was using it: it now holds another run" in result.stderr
    assert "Leave the folder to that run: set another 'work_dir'" in result.stderr
    assert "Delete what is left" not in result.stderr and "Traceback" not in result.stderr
