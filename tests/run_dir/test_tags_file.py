"""A run's tags file: several processes tagging one run at once lose nothing (the lock), a file that is not a tags
file is named with what to do and never overwritten, and it takes no other run's tags with it."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time

import pytest

from run_dir import RunDir
from run_dir.tags_file import TagsFileError, change_tags, clean_tag, read_tags, tags_version
from tests.runs import REPO_ROOT

pytestmark = pytest.mark.timeout(300)

WRITERS = 4
CHANGES = 15
# One writer: says it is ready, waits for the start file, then tags its own idx one change at a time (and takes one
# tag off again).
WRITER = """
import os, sys, time
from run_dir.tags_file import change_tags
run, start, me, changes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
open(f"{start}.ready{me}", "w").close()
while not os.path.exists(start):
    time.sleep(0.001)
for i in range(changes):
    change_tags(run, "shared", [me * 1000 + i])
    change_tags(run, f"writer {me}", [i, i + 500])
    change_tags(run, f"writer {me}", [i + 500], add=False)
"""


@pytest.mark.slow
def test_several_processes_tagging_one_run_at_once_lose_nothing(tmp_path):
    run, start = tmp_path / "run", tmp_path / "start"
    run.mkdir()
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(run), str(start), str(me), str(CHANGES)],
                                cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True) for me in range(WRITERS)]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"start.ready{me}").exists() for me in range(WRITERS)):  # all imported and waiting
        assert time.monotonic() < deadline and all(writer.poll() is None for writer in writers), "a writer failed"
        time.sleep(0.01)
    start.touch()  # they start together
    for writer in writers:
        assert writer.wait(timeout=240) == 0, writer.stderr.read()
    tags = read_tags(str(run))
    assert tags["shared"] == sorted(me * 1000 + i for me in range(WRITERS) for i in range(CHANGES))
    for me in range(WRITERS):
        assert tags[f"writer {me}"] == list(range(CHANGES))
    assert sorted(os.listdir(run)) == [".tags.lock", "tags.json"], "a temporary file was left behind"


def test_tags_are_given_and_taken_and_a_tag_no_datapoint_carries_is_gone(tmp_path):
    assert read_tags(str(tmp_path)) == {} and tags_version(str(tmp_path)) is None
    assert change_tags(str(tmp_path), " blurry ", [5, 3, 5]) == {"blurry": [3, 5]}
    before = tags_version(str(tmp_path))
    assert change_tags(str(tmp_path), "blurry", [3], add=False) == {"blurry": [5]}
    assert tags_version(str(tmp_path)) != before
    assert change_tags(str(tmp_path), "blurry", [5], add=False) == {}
    assert json.loads((tmp_path / "tags.json").read_text())["tags"] == {}


@pytest.mark.parametrize("name", ["", "   ", "a,b", "tab\there", "x" * 41, 5, None])
def test_a_name_that_is_no_tag_is_refused_saying_what_a_tag_may_be(tmp_path, name):
    with pytest.raises(TagsFileError, match="tag"):
        change_tags(str(tmp_path), name, [1])
    assert not (tmp_path / "tags.json").exists()
    assert clean_tag("  ring  ") == "ring"


@pytest.mark.parametrize("idx", [-1, 2**63, 1.5, True, "3"])
def test_an_idx_that_is_no_dataset_index_is_refused(tmp_path, idx):
    with pytest.raises(TagsFileError, match="not a dataset index"):
        change_tags(str(tmp_path), "ring", [idx])


@pytest.mark.parametrize("kind", ["not json", "wrong shape", "unsorted", "link", "fifo", "huge"])
def test_a_file_that_is_no_tags_file_is_named_never_overwritten_and_leaves_other_runs_alone(tmp_path, kind):
    run, other = tmp_path / "run", tmp_path / "other"
    run.mkdir()
    other.mkdir()
    change_tags(str(other), "kept", [1, 2])
    path = run / "tags.json"
    if kind == "link":
        os.symlink(other / "tags.json", path)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.write_text({"not json": "{nope", "wrong shape": '{"format": "lantern-tags", "tags": {"a": "1"}}',
                         "unsorted": '{"format": "lantern-tags", "tags": {"a": [3, 1]}}',
                         "huge": '{"pad": "' + "x" * (65 << 20) + '"}'}[kind])
    before = os.lstat(path)
    with pytest.raises(TagsFileError, match=f"{path}.*move it away"):
        read_tags(str(run))
    with pytest.raises(TagsFileError, match="move it away"):
        change_tags(str(run), "new", [7])
    after = os.lstat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    assert read_tags(str(other)) == {"kept": [1, 2]}


def test_a_lock_held_past_the_wait_is_an_error_never_a_hang(tmp_path):
    holder = os.open(RunDir(str(tmp_path)).tags_lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        started = time.monotonic()
        with pytest.raises(TagsFileError, match="another viewer has held the tags"):
            change_tags(str(tmp_path), "ring", [1], wait_s=0.3)
        assert time.monotonic() - started < 30
    finally:
        os.close(holder)
    assert change_tags(str(tmp_path), "ring", [1], wait_s=0.3) == {"ring": [1]}


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_a_lock_file_that_is_a_link_or_a_fifo_is_refused(tmp_path, kind):
    lock = RunDir(str(tmp_path)).tags_lock
    if kind == "link":
        os.symlink(tmp_path / "elsewhere", lock)
    else:
        os.mkfifo(lock)
    with pytest.raises(TagsFileError, match="symbolic link|not a regular file"):
        change_tags(str(tmp_path), "ring", [1])
    assert not (tmp_path / "elsewhere").exists()
