"""Saved views cannot be lost.

Before: (a) a save was checked on the address as sent but stored re-encoded (``*`` -> ``%2A``), so one long
address made the next read refuse the whole file, for every run, and every later save failed; (b) 262 saves of
allowed size made a 4 MiB file the reader refused as "not one Lantern wrote"; (c) 4 viewers saving at once kept 316,
then 243, of 600 views (no lock between processes). Now each run's views are a file of their own, changed under a
lock between processes, checked as stored, bounded by the writer before the reader would refuse.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys

import pytest

from run_dir import saved_views as views_files
from run_dir.saved_views import MAX_BYTES, MAX_VIEWS, views_file
from runners.eval_viewer.address.saved_views import MAX_QUERY, SavedViews, SavedViewsError
from tests.runs import REPO_ROOT

RUN, OTHER = "/runs/a", "/runs/b"


def long_address(length: int) -> str:
    """An address of ``length`` characters as sent, which ``*`` makes three times as long once stored."""
    return f"?run={RUN}&f.name=" + "*" * (length - len(f"?run={RUN}&f.name="))


def test_an_address_is_checked_as_it_is_stored(tmp_path):
    views = SavedViews(str(tmp_path))
    views.save(OTHER, "kept", f"?run={OTHER}&idx=1")
    with pytest.raises(SavedViewsError, match=f"at most {MAX_QUERY} characters"):
        views.save(RUN, "long", long_address(MAX_QUERY))  # fits as sent, three times too long as stored
    fits = long_address(MAX_QUERY // 3)
    views.save(RUN, "fits", fits)
    stored = views.of_run(RUN)["fits"]
    assert "%2A" in stored and len(stored) <= MAX_QUERY
    views.save(RUN, "later", f"?run={RUN}&idx=2")
    assert sorted(views.of_run(RUN)) == ["fits", "later"] and views.of_run(OTHER) == {"kept": "run=%2Fruns%2Fb&idx=1"}


def test_the_writer_refuses_before_the_reader_would(tmp_path):
    """As many views of the longest address as a run may have: every save either kept or refused saying why; the
    file is always one the reader takes."""
    views = SavedViews(str(tmp_path))
    address = f"?run={RUN}&f.name=" + "x" * (MAX_QUERY - 40)
    for i in range(MAX_VIEWS):
        views.save(RUN, f"view {i}", address)
    with pytest.raises(SavedViewsError, match=f"has {MAX_VIEWS} saved views already"):
        views.save(RUN, "one more", address)
    assert len(views.of_run(RUN)) == MAX_VIEWS
    assert os.path.getsize(views_file(str(tmp_path), RUN)) <= MAX_BYTES
    views.save(OTHER, "another run", address)  # each run's views in a file of its own
    assert list(views.of_run(OTHER)) == ["another run"]


def test_a_file_the_reader_cannot_use_is_named_and_takes_no_other_run_s_views(tmp_path):
    views = SavedViews(str(tmp_path))
    views.save(RUN, "mine", f"?run={RUN}")
    views.save(OTHER, "theirs", f"?run={OTHER}")
    damaged = views_file(str(tmp_path), RUN)
    with open(damaged, "w") as file:
        file.write('{"format": "lantern-viewer-views", "run": "/runs/a", "views": {"x": "run=' + "*" * 9 + '"}}')
    for act in (lambda: views.of_run(RUN), lambda: views.save(RUN, "new", f"?run={RUN}")):
        with pytest.raises(SavedViewsError) as raised:
            act()
        assert f"move {damaged} away" in str(raised.value)
    assert views.of_run(OTHER) == {"theirs": "run=%2Fruns%2Fb"}
    views.save(OTHER, "still", f"?run={OTHER}")
    assert sorted(views.of_run(OTHER)) == ["still", "theirs"]
    os.remove(damaged)
    views.save(RUN, "afresh", f"?run={RUN}")
    assert list(views.of_run(RUN)) == ["afresh"]


SAVER = """
import sys
from runners.eval_viewer.address.saved_views import SavedViews
folder, run, viewer, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
views = SavedViews(folder)
for i in range(count):
    views.save(run, f"viewer {viewer} view {i}", f"?run={run}&idx={i}")
"""


@pytest.mark.slow
def test_four_viewers_saving_at_once_keep_every_view(tmp_path):
    """4 processes, each saving 50 views of one run and 100 of a run of its own, all at once: all 600 kept."""
    per_process = MAX_VIEWS // 4
    savers = [subprocess.Popen([sys.executable, "-c", SAVER, str(tmp_path), run, str(viewer), str(count)],
                               cwd=REPO_ROOT)
              for viewer in range(4) for run, count in ((RUN, per_process), (f"/runs/{viewer}", 100))]
    assert [saver.wait(timeout=300) for saver in savers] == [0] * len(savers)
    views = SavedViews(str(tmp_path))
    assert len(views.of_run(RUN)) == 4 * per_process
    assert [len(views.of_run(f"/runs/{viewer}")) for viewer in range(4)] == [100] * 4
    assert sorted(os.listdir(tmp_path)) == sorted([".lock"] + [os.path.basename(views_file("", run)) for run in
                                                               [RUN] + [f"/runs/{v}" for v in range(4)]])


def test_a_lock_held_elsewhere_is_an_error_not_a_hang(tmp_path, monkeypatch):
    monkeypatch.setattr(views_files, "LOCK_TIMEOUT_S", 0.3)
    views = SavedViews(str(tmp_path))
    views.save(RUN, "before", f"?run={RUN}")
    with open(tmp_path / ".lock", "w") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        with pytest.raises(SavedViewsError, match="another viewer has held") as raised:
            views.save(RUN, "while held", f"?run={RUN}")
        assert "move" not in str(raised.value)  # the file is fine: nothing to move away
        assert list(views.of_run(RUN)) == ["before"]  # reading needs no lock: the file is whole or absent
    views.save(RUN, "after", f"?run={RUN}")
    assert json.loads(open(views_file(str(tmp_path), RUN)).read())["views"].keys() == {"before", "after"}
