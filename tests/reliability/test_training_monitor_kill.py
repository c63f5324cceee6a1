"""SIGKILL a monitored run in its second epoch, halfway through writing a frame of the monitor file and between two
steps, then run the same command again: the file it ends with holds every step once, equal to the file of the
same run never killed. As in test_kill_and_resume.py, the faults are the test config's own code (a criterion,
and the monitor file's append, that kill their process), and a marker per point makes each start die at the
next point only."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from run_dir.monitor_file import read_frames
from run_dir.names import MONITOR_FILE
from run_dir.training_log import KIND_LAYOUT, read_training_log
from runners.config_file import load_config
from runners.trainers import BaseTrainer
from tests.runs import run_main, write_config

pytestmark = pytest.mark.slow  # runs in .ci/run's second command (README: the slow tests)

POINTS = ["half_a_frame", "between_steps"]
MONITOR = 'config["training_monitor"] = {"every_n_steps": 2}\n'

KILLS = '''
import os
import signal

from run_dir import monitor_file

MARKERS = {markers!r}
POINTS = {points!r}


def my_turn(point):
    """True at the first point not killed at yet (and marks it): each start dies at the next point."""
    if next((p for p in POINTS if not os.path.exists(os.path.join(MARKERS, p))), None) != point:
        return False
    open(os.path.join(MARKERS, point), "w").close()
    return True


_append = monitor_file.MonitorFileWriter.append
appends_in_epoch_1 = []


def append_half_then_die(self, fields, arrays=None):
    if fields.get("epoch") == 1:
        appends_in_epoch_1.append(fields["kind"])
        if len(appends_in_epoch_1) == 2 and my_turn("half_a_frame"):
            frame = monitor_file.encode_frame(fields, arrays)
            os.write(self._fd, frame[:len(frame) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
    _append(self, fields, arrays)


monitor_file.MonitorFileWriter.append = append_half_then_die
losses_in_epoch_1 = []


class KillingCriterion(CrossEntropyCriterion):
    def __call__(self, outputs, labels):
        loss = super().__call__(outputs, labels)
        if os.path.exists(os.path.join(config["work_dir"], "epoch_0", "checkpoint.pt")):
            losses_in_epoch_1.append(loss)
            if len(losses_in_epoch_1) == 4 and my_turn("between_steps"):
                os.kill(os.getpid(), signal.SIGKILL)
        return loss


config["criterion"] = {{"class": KillingCriterion, "args": {{}}}}
'''


def config_file(tmp_path, name, kills=False):
    markers = tmp_path / f"{name}.killed"
    markers.mkdir()
    extra = MONITOR + (KILLS.format(markers=str(markers), points=POINTS) if kills else "")
    return write_config(tmp_path / f"{name}.py", tmp_path / name, epochs=2, checkpoint_method="all", train_size=96,
                        val_size=8, extra=extra)


@pytest.mark.timeout(300)
def test_a_monitored_run_killed_mid_frame_and_between_steps_resumes_to_the_same_file(tmp_path):
    reference = load_config(config_file(tmp_path, "reference"))
    BaseTrainer(reference).run()
    path = config_file(tmp_path, "killed", kills=True)
    monitor_path = str(tmp_path / "killed" / MONITOR_FILE)
    for point in POINTS:
        killed = run_main(path, timeout=120)
        assert killed.returncode == -signal.SIGKILL, (point, killed.stderr)
        assert os.path.exists(tmp_path / "killed.killed" / point), f"the run did not die at {point}"
        read = read_frames(monitor_path)
        assert ("torn" in (read.problem or "")) == (point == "half_a_frame"), read.problem
        assert read_training_log(monitor_path).loss_steps.size > 6  # epoch 0's six steps and some of epoch 1's

    resumed = run_main(path, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    ours, theirs = read_training_log(monitor_path), read_training_log(str(tmp_path / "reference" / MONITOR_FILE))
    assert ours.problems == [] and ours.steps.tolist() == theirs.steps.tolist() == list(range(0, 12, 2))
    assert ours.loss_steps.tolist() == list(range(12))
    np.testing.assert_allclose(ours.losses, theirs.losses, rtol=1e-5)
    for name in ("grad_norm", "weight_norm", "update_ratio", "lr"):
        np.testing.assert_allclose(getattr(ours, name), getattr(theirs, name), rtol=1e-4, err_msg=name)
    assert [h.epoch for h in ours.histograms] == [0, 1]
    for mine, reference_epoch in zip(ours.histograms, theirs.histograms):
        np.testing.assert_allclose(mine.weight_range, reference_epoch.weight_range, rtol=1e-5)
    layouts = [f for f in read_frames(monitor_path).frames if f.fields["kind"] == KIND_LAYOUT]
    assert len(layouts) == 1  # each start continued the file it found
