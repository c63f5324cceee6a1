"""Progress bars only on a terminal: a run whose stderr is a file (nohup, slurm) writes log lines there, not a
bar's redraws (runners/progress.py)."""

from __future__ import annotations

import fcntl
import io
import logging
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

from runners.progress import Progress
from tests.runs import REPO_ROOT, write_config


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_redirected_run_writes_log_lines_and_no_bar(tmp_path):
    path = write_config(tmp_path / "c.py", tmp_path / "w", epochs=2)
    with open(tmp_path / "stderr.txt", "w") as stderr:
        result = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "main.py"), "--config-filepath", path],
                                cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=200)
    assert result.returncode == 0
    written = (tmp_path / "stderr.txt").read_text()
    log = (tmp_path / "w" / "train.log").read_text()
    assert "\r" not in written and "it/s" not in written
    assert len(written.splitlines()) == len(log.splitlines())  # each line a log record, as in train.log


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_on_a_terminal_the_bar_is_drawn(tmp_path):
    path = write_config(tmp_path / "c.py", tmp_path / "w", epochs=1)
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a 0-column one draws nothing
    process = subprocess.Popen([sys.executable, os.path.join(REPO_ROOT, "main.py"), "--config-filepath", path],
                               cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=terminal)
    os.close(terminal)
    drawn = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the process ended and closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    assert process.wait(timeout=200) == 0
    os.close(controller)
    assert b"\r" in drawn and b"train 0" in drawn and b"it/s" in drawn


def logged(every_s: float, batches: int = 5) -> list[str]:
    stream = io.StringIO()
    logger = logging.getLogger(f"test_progress_{every_s}")
    logger.handlers = [logging.StreamHandler(stream)]
    logger.setLevel(logging.INFO)
    progress = Progress(range(batches), "train 3", logger, shown=True, every_s=every_s, terminal=False)
    for batch in progress:
        progress.note(loss=f"{batch / 10:.3f}")
    return stream.getvalue().splitlines()


def test_elsewhere_a_long_pass_logs_a_line_at_most_every_so_often():
    assert logged(every_s=1e9) == []  # a pass shorter than the interval: the epoch's own line says it all
    lines = logged(every_s=0.0)
    assert len(lines) == 5 and lines[2].startswith("train 3: 3/5 batches in ") and lines[2].endswith(", loss 0.200")
