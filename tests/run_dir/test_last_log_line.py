"""A run log's last line read as data (``run_dir.run_log.last_log_line``): the viewer's run picker says with it why a
run never finished an epoch. Only the file's tail is read; a link or a FIFO is not opened."""

from __future__ import annotations

import os

from run_dir.run_log import TAIL_BYTES, last_log_line


def test_the_last_line_without_its_time_and_rank(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("09:00:01 [rank 0] INFO BaseTrainer on cpu\n" + "x" * (3 * TAIL_BYTES) + "\n"
                   "09:00:02 [rank 0] ERROR process 7 stopped during start-up (exit code 2): bad layer\n\n")
    assert last_log_line(str(log)) == "ERROR process 7 stopped during start-up (exit code 2): bad layer"
    assert last_log_line(str(log), max_chars=20) == "ERROR process 7 sto…"


def test_no_line_from_an_empty_file_a_link_or_a_fifo(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("\n\n")
    assert last_log_line(str(empty)) is None
    target = tmp_path / "outside.log"
    target.write_text("09:00:02 [rank 0] ERROR a secret\n")
    os.symlink(target, tmp_path / "train.log")
    assert last_log_line(str(tmp_path / "train.log")) is None
    os.mkfifo(tmp_path / "eval.log")
    assert last_log_line(str(tmp_path / "eval.log")) is None  # returns at once: a FIFO is never opened to read
    assert last_log_line(str(tmp_path / "absent.log")) is None
