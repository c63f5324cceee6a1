"""The training monitor's file: frames round-trip; a torn last frame (a write cut at any byte) is ignored by the
reader and cut off by the next writer; a crafted file yields fewer frames and a reason, never an exception,
a hang or a large allocation; the log read back follows a live file and a rewritten one."""

from __future__ import annotations

import json
import os
import zlib

import numpy as np
import pytest

from run_dir.errors import MonitorFileError, RunFileError
from run_dir.monitor_file import (
    FRAME_HEAD,
    JSON_HEAD,
    MAGIC,
    MAX_FRAME_BYTES,
    MonitorFileWriter,
    encode_frame,
    read_frames,
)
from run_dir.training_log import (
    KIND_EPOCH,
    KIND_LAYOUT,
    KIND_STEP,
    TrainingLogReader,
    read_training_log,
)

LAYERS = ["a", "b", "c"]


def layout(epoch=0):
    return {"kind": KIND_LAYOUT, "epoch": epoch, "step": 0, "layers": LAYERS, "layer_types": ["Linear"] * 3}


def step_row(step, epoch=0, first_step=None, grad=1.0):
    first = step if first_step is None else first_step
    losses = np.arange(first, step + 1, dtype=np.float32) / 10
    return ({"kind": KIND_STEP, "epoch": epoch, "step": step, "first_step": first, "loss": float(losses[-1])},
            {"losses": losses, "lr": np.array([0.1, 0.01]), "grad_norm": np.full(3, grad, np.float32),
             "weight_norm": np.ones(3, np.float32), "update_ratio": np.full(3, 1e-3, np.float32),
             "grad_state": np.zeros(3, np.uint8)})


def write(path, frames, keep=lambda frame: True):
    writer = MonitorFileWriter(str(path), keep)
    for fields, arrays in frames:
        writer.append(fields, arrays)
    writer.close()
    return writer


def crafted(path, payloads):
    """A file of frames whose payloads are given raw, each with a correct length and CRC."""
    path.write_bytes(MAGIC + b"".join(FRAME_HEAD.pack(len(p), zlib.crc32(p)) + p for p in payloads))
    return str(path)


def payload(fields, tail=b""):
    head = json.dumps(fields).encode()
    return JSON_HEAD.pack(len(head)) + head + tail


def test_frames_round_trip_with_their_arrays(tmp_path):
    path = tmp_path / "m.bin"
    write(path, [(layout(), None), step_row(0), step_row(5, first_step=1)])
    read = read_frames(str(path))
    assert read.problem is None and read.end == os.path.getsize(path)
    assert [f.fields["kind"] for f in read.frames] == [KIND_LAYOUT, KIND_STEP, KIND_STEP]
    fields, arrays = step_row(5, first_step=1)
    assert read.frames[2].fields == fields
    for name, array in arrays.items():
        np.testing.assert_array_equal(read.frames[2].arrays[name], array)
        assert read.frames[2].arrays[name].dtype == array.dtype


def test_a_write_cut_at_any_byte_leaves_the_earlier_frames_and_the_next_writer_continues(tmp_path):
    path = tmp_path / "m.bin"
    write(path, [(layout(), None), step_row(0)])
    whole = path.read_bytes()
    last = encode_frame(*step_row(1))
    for cut in range(len(last)):  # every length a kill can leave of the last frame
        path.write_bytes(whole + last[:cut])
        read = read_frames(str(path))
        assert [f.fields["step"] for f in read.frames] == [0, 0], cut
        assert (read.problem is None) == (cut == 0), cut
        writer = write(path, [step_row(2)])
        assert len(writer.kept) == 2
        assert [f.fields["step"] for f in read_frames(str(path)).frames] == [0, 0, 2], cut


def test_a_kill_while_the_file_is_created_leaves_a_file_the_next_writer_starts_anew(tmp_path):
    """A kill between creating the file and writing its magic (or mid-magic) leaves 0 to 7 bytes of it: a run
    resumed after that starts the file anew, and a reader of it finds no frame yet, not a foreign file."""
    path = tmp_path / "m.bin"
    for cut in range(len(MAGIC)):
        path.write_bytes(MAGIC[:cut])
        read = read_frames(str(path))
        assert read.frames == [] and read.problem is None, cut
        writer = write(path, [(layout(), None)])
        assert writer.kept == [], cut
        assert [f.fields["kind"] for f in read_frames(str(path)).frames] == [KIND_LAYOUT], cut


def test_a_flipped_byte_in_the_last_frame_is_caught_by_its_crc(tmp_path):
    path = tmp_path / "m.bin"
    write(path, [(layout(), None), step_row(0)])
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    read = read_frames(str(path))
    assert len(read.frames) == 1 and "torn" in read.problem


def test_a_resumed_writer_keeps_only_the_frames_it_is_told_to(tmp_path):
    """A resumed run keeps the finished epochs' frames: the killed epoch's are cut, then written anew."""
    path = tmp_path / "m.bin"
    write(path, [(layout(), None), step_row(0, epoch=0), step_row(4, epoch=1, first_step=1), step_row(8, epoch=1)])
    writer = write(path, [step_row(4, epoch=1, first_step=1, grad=2.0)], keep=lambda f: f.fields["epoch"] < 1)
    assert [f.fields["kind"] for f in writer.kept] == [KIND_LAYOUT, KIND_STEP]
    log = read_training_log(str(path))
    assert log.steps.tolist() == [0, 4] and log.grad_norm[:, 0].tolist() == [1.0, 2.0]
    assert log.loss_steps.tolist() == list(range(5))


@pytest.mark.parametrize("kind", ["symlink", "fifo", "other magic"])
def test_a_file_that_is_not_a_monitor_file_is_refused_at_once(tmp_path, kind):
    path = tmp_path / "m.bin"
    if kind == "symlink":
        real = tmp_path / "real.bin"
        write(real, [(layout(), None)])
        os.symlink(real, path)
    elif kind == "fifo":
        os.mkfifo(path)  # opening it blocking would hang the reader forever
    else:
        path.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    with pytest.raises(RunFileError):
        read_frames(str(path))
    if kind == "other magic":
        with pytest.raises(MonitorFileError, match="move it out of the work dir"):
            MonitorFileWriter(str(path), lambda frame: True)


@pytest.mark.parametrize("frame, reason", [
    (FRAME_HEAD.pack(2**32 - 1, 0), "over the limit"),
    (FRAME_HEAD.pack(MAX_FRAME_BYTES, 0), "torn frame"),
])
def test_a_frame_claiming_a_huge_length_is_not_read(tmp_path, frame, reason):
    path = tmp_path / "m.bin"
    path.write_bytes(MAGIC + encode_frame(layout()) + frame + b"\0" * 64)
    read = read_frames(str(path))
    assert len(read.frames) == 1 and reason in read.problem


@pytest.mark.parametrize("raw, reason", [
    (JSON_HEAD.pack(2**31) + b"{}", "claim"),
    (payload({"kind": "step"})[:-1] + b"\xff", "not JSON"),
    (payload(["a list"]), "not a JSON object"),
    (JSON_HEAD.pack(200_000) + b"[" * 100_000 + b"]" * 100_000, "not JSON (RecursionError)"),
    (payload({"arrays": [["x", "f4", [2**20]]]}, b"\0" * 8), "runs past"),
    (payload({"arrays": [["x", "f4", [1, 1, 1]]]}, b"\0" * 4), "is not [name"),
    (payload({"arrays": [["x", "object", [1]]]}, b"\0" * 8), "is not [name"),
    (payload({"arrays": [["x", "f4", [-1]]]}, b"\0" * 8), "is not [name"),
    (payload({"arrays": []}, b"\0" * 3), "after its arrays"),
])
def test_a_crafted_frame_with_a_valid_crc_is_refused_with_a_reason(tmp_path, raw, reason):
    path = crafted(tmp_path / "m.bin", [encode_frame(layout())[FRAME_HEAD.size:], raw, payload({"kind": "x"})])
    read = read_frames(path)
    assert len(read.frames) == 1 and reason in read.problem, read.problem


def test_fields_of_the_wrong_type_skip_their_frame_and_are_counted(tmp_path):
    good_fields, arrays = step_row(3)
    frames = [encode_frame(layout())[FRAME_HEAD.size:]]
    for bad in ({"step": "3"}, {"step": -1}, {"first_step": 2}, {"epoch": 2**60}, {"epoch": True}):
        frames.append(encode_frame({**good_fields, **bad}, arrays)[FRAME_HEAD.size:])
    frames.append(encode_frame(*step_row(3, grad=0.5)[:1], {**arrays, "grad_norm": np.ones(4, np.float32)})
                  [FRAME_HEAD.size:])
    frames.append(encode_frame({"kind": "nonfinite", "epoch": 0, "step": 3, "batch_idx": ["1"]})[FRAME_HEAD.size:])
    frames.append(encode_frame(good_fields, arrays)[FRAME_HEAD.size:])
    log = read_training_log(crafted(tmp_path / "m.bin", frames))
    assert log.steps.tolist() == [3] and log.events == []
    assert any("7 frame(s)" in problem for problem in log.problems), log.problems


def test_a_row_with_another_count_of_learning_rates_is_skipped_not_padded_into_every_row(tmp_path):
    """Every row of a run holds one learning rate per parameter group of its one optimizer. A crafted row with
    800 kB of them among thousands of small rows must not make every row that wide (rows x its width: gigabytes
    from a few megabytes of file): it is skipped and counted."""
    fields, arrays = step_row(0)
    wide = encode_frame({**fields, "step": 1, "first_step": 1}, {**arrays, "lr": np.zeros(100_000)})
    frames = [encode_frame(layout())[FRAME_HEAD.size:], encode_frame(fields, arrays)[FRAME_HEAD.size:],
              wide[FRAME_HEAD.size:]]
    frames += [encode_frame(*step_row(s))[FRAME_HEAD.size:] for s in range(2, 50)]
    log = read_training_log(crafted(tmp_path / "m.bin", frames))
    assert log.lr.shape == (49, 2) and 1 not in log.steps.tolist()
    assert any("1 frame(s)" in problem for problem in log.problems), log.problems


def test_the_reader_stops_at_its_byte_cap_and_says_so(tmp_path):
    path = tmp_path / "m.bin"
    write(path, [(layout(), None)] + [step_row(s) for s in range(20)])
    ends = [frame.end for frame in read_frames(str(path)).frames]
    read = read_frames(str(path), max_bytes=ends[3] - len(MAGIC) + 10)
    assert len(read.frames) == 4 and "only the first" in read.problem, read.problem
    assert read_frames(str(path), start=ends[3]).frames[0].fields["step"] == 3


def test_a_live_file_is_followed_and_a_cut_one_read_again(tmp_path):
    path = tmp_path / "m.bin"
    writer = MonitorFileWriter(str(path), lambda frame: True)
    writer.append(layout())
    writer.append(*step_row(0))
    reader = TrainingLogReader(str(path))
    assert reader.read().steps.tolist() == [0]
    writer.append(*step_row(10, first_step=1))
    epoch_end = {"kind": KIND_EPOCH, "epoch": 0, "step": 12, "first_step": 11, "nonfinite_steps": 0}
    writer.append(epoch_end, {"losses": np.ones(1, np.float32), "weight_counts": np.ones((3, 4), np.int64),
                              "weight_range": np.zeros((3, 2)), "weight_nonfinite": np.zeros(3, np.int64),
                              "grad_counts": np.ones((3, 4), np.int64), "grad_range": np.zeros((3, 2)),
                              "grad_nonfinite": np.zeros(3, np.int64)})
    log = reader.read()
    assert log.steps.tolist() == [0, 10] and log.loss_steps.tolist() == list(range(12))
    assert [h.epoch for h in log.histograms] == [0]
    writer.close()
    write(path, [step_row(4, first_step=1)], keep=lambda f: f.fields["kind"] != KIND_STEP or f.fields["step"] < 4)
    log = reader.read()  # the file was cut: read from its start again
    assert log.steps.tolist() == [0, 4] and log.loss_steps.tolist() == list(range(5)) and log.histograms == []


def test_new_settings_keep_the_rows_and_new_layers_start_them_anew(tmp_path):
    path = tmp_path / "m.bin"
    resumed = {**layout(epoch=1), "every_n_steps": 5}
    write(path, [(layout(), None), step_row(0), (resumed, None), step_row(5, epoch=1, first_step=1)])
    log = read_training_log(str(path))
    assert log.steps.tolist() == [0, 5] and log.settings["every_n_steps"] == 5
    other = {**layout(epoch=2), "layers": ["a", "b", "c"][::-1]}
    write(path, [(other, None), step_row(9, epoch=2, first_step=6)])
    log = read_training_log(str(path))
    assert log.layers == ["c", "b", "a"] and log.steps.tolist() == [9]  # norms of other layers are not mixed in
    assert log.loss_steps.tolist() == list(range(10))  # every step's loss is kept
