"""A crafted training monitor file against a real viewer server: the Training tab says what is wrong in place,
within seconds, reads nothing through a link and nothing beyond its caps, and the run beside it still draws."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from run_dir.monitor_file import FRAME_HEAD, read_frames
from run_dir.names import MONITOR_FILE
from runners.eval_viewer.controls.ids import RUN_SELECT
from runners.eval_viewer.shared.ids import TABS
from runners.eval_viewer.training.ids import TAB_TRAINING, TRAINING_SUMMARY
from tests.reliability.test_viewer_trust import _within_seconds
from tests.reliability.viewer_server import call_callback, serve_viewer
from tests.runs import train, write_config

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def monitored_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("training_trust")
    path = write_config(root / "run.py", root / "run", epochs=1, val_size=8,
                        extra='config["training_monitor"] = {"every_n_steps": 2}')
    return train(path)


def _summary(url: str, run_path: str) -> str:
    status, body = call_callback(url, f"{TRAINING_SUMMARY}.children", {
        f"{TABS}.value": TAB_TRAINING, f"{RUN_SELECT}.value": run_path})
    assert status == 200, body
    return json.dumps(json.loads(body)["response"][TRAINING_SUMMARY]["children"])


def _damage(path: str, kind: str, outside: str) -> tuple[str, list[str]]:
    """Damage the file at ``path``; return what the tab must say and the FIFOs a blocked read would wait on."""
    frames = read_frames(path).frames
    if kind == "fifo":
        os.remove(path)
        os.mkfifo(path)
        return "is not a regular file (a FIFO", [path]
    if kind == "link":
        shutil.move(path, outside)
        os.symlink(outside, path)
        return "is a symlink or a special file", []
    if kind == "other format":
        with open(path, "r+b") as f:
            f.write(b"PK\x03\x04")
        return "does not start as a Lantern training monitor file", []
    with open(path, "r+b") as f:
        f.seek(frames[1].end)
        if kind == "huge frame":
            f.write(FRAME_HEAD.pack(2**32 - 1, 0))
            return "claims 4,294,967,295 bytes, over the limit", []
        f.truncate(frames[1].end)
        f.truncate(3 * 2**30)  # sparse: gigabytes of zeros after the first two frames
        return "is malformed: its payload is shorter than its own header", []


@pytest.mark.parametrize("kind", ["fifo", "link", "other format", "huge frame", "sparse gigabytes"])
def test_a_crafted_monitor_file_is_said_in_place_and_the_other_run_draws(monitored_run, tmp_path, kind):
    logs = tmp_path / "logs"
    good, bad = (shutil.copytree(monitored_run, logs / name) for name in ("good", "bad"))
    said, fifos = _damage(os.path.join(bad, MONITOR_FILE), kind, str(tmp_path / "outside.bin"))
    with serve_viewer([str(logs)]) as url:
        summary = _within_seconds(lambda: _summary(url, str(bad)), fifos=fifos)
        assert said in summary, summary
        if kind in ("huge frame", "sparse gigabytes"):  # the frames before the damage are still shown
            assert "training steps" in summary
        assert "4 training steps" in _within_seconds(lambda: _summary(url, str(good)))
