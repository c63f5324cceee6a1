"""From a debugger's batch output to pages: conversion per batch, errors per debugger, memory really held."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

from debuggers.base_debugger import BaseDebugger
from debuggers.batch_split import split_batch
from debuggers.pages import file_format as page_format
from debuggers.pages.values import held_storage
from debuggers.pages.writer import PageWriter
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from runners.eval_viewer.backend.initialization import load_debug_outputs

pytestmark = pytest.mark.timeout(60)


class Returns(BaseDebugger):
    """Returns ``make(batch_size)`` for every batch: row i is position i of the batch, by declaration."""

    batch_mode = "batched"

    def __init__(self, make) -> None:
        self.make = make

    def __call__(self, datapoint, model):
        return self.make(len(datapoint["meta_info"]["idx"]))


def capture(tmp_path, makers: dict, batches: int = 2, batch_size: int = 4):
    model = torch.nn.Linear(3, 2)
    config = [{"name": name, "debugger_config": {"class": Returns, "args": {"make": make}}}
              for name, make in makers.items()]
    debugger = SequentialDebugger(config, page_size_mb=1, model=model)
    debugger.reset_buffer(str(tmp_path / "debugger"))
    debugger.enabled = True
    for b in range(batches):
        idx = torch.arange(b * batch_size, (b + 1) * batch_size)
        debugger({"inputs": torch.zeros(batch_size, 3), "meta_info": {"idx": idx}}, model)
    summary = debugger.save_all(str(tmp_path / "debugger"))
    debugger.close()
    return summary, load_debug_outputs(str(tmp_path))


def test_an_output_numpy_cannot_hold_is_that_debuggers_error_alone(tmp_path):
    summary, outputs = capture(tmp_path, {
        "good": lambda n: {"x": torch.arange(n * 3.0).reshape(n, 3)},
        "bits": lambda n: {"b": torch.zeros(n, 2, dtype=torch.uint8).view(torch.bits8)},
        "wrapped": lambda n: TwoTensor(torch.ones(n, 2), torch.zeros(n, 2)),
    })
    assert "error" not in summary and summary["datapoints"] == 8 and list(outputs) == list(range(8))
    for idx in outputs:
        np.testing.assert_array_equal(outputs[idx]["good"]["x"], np.arange(3.0) + 3 * (idx % 4))
        assert outputs[idx]["bits"]["type"] == "UnsupportedOutputError"
        assert "'bits.b'" in outputs[idx]["bits"]["message"] and "bits8" in outputs[idx]["bits"]["message"]
        assert outputs[idx]["wrapped"]["type"] == "UnsupportedOutputError"


def test_rows_are_converted_once_per_batch_and_equal_the_datapoint_alone(tmp_path):
    batch = torch.randn(4, 2, 3)
    rows = split_batch({"map": batch, "mean": batch.mean(dim=(1, 2)), "name": "layer"}, 4)
    alone = split_batch({"map": batch[2:3], "mean": batch[2:3].mean(dim=(1, 2)), "name": "layer"}, 1)[0]
    assert rows[2]["map"].base is rows[0]["map"].base  # views of one array converted for the whole batch
    np.testing.assert_array_equal(rows[2]["map"], alone["map"])
    assert rows[2]["mean"] == pytest.approx(alone["mean"]) and type(rows[2]["mean"]) is float
    assert rows[2]["name"] == "layer"


def held(value) -> int:
    return sum(dict((id(owner), nbytes) for owner, nbytes in held_storage(value)).values())


def test_a_small_view_of_a_large_tensor_does_not_pin_it():
    big = torch.randn(8, 1_000_000)  # 32 MB
    rows = split_batch({"edge": big[:, :2]}, 8)
    assert held(rows) == 8 * 2 * 4  # copied: the 32 MB storage can be freed
    np.testing.assert_array_equal(rows[5]["edge"], big[5, :2].numpy())


def test_the_writer_counts_the_memory_a_value_really_keeps_alive(tmp_path, monkeypatch):
    release = threading.Event()
    monkeypatch.setattr(page_format, "_append", lambda file, buffers: release.wait(30))  # a stuck disk
    writer = PageWriter(1 << 20, max_in_flight_bytes=1 << 20, stall_timeout_s=1.0)
    try:
        writer.start_epoch(str(tmp_path))
        base = np.zeros((4, 1_000_000), np.float32)  # 16 MB, kept alive by a view of 8 bytes
        writer.add(0, {"view": base[0, :2]})  # admitted: nothing else is in flight
        assert writer.in_flight_bytes >= base.nbytes
        with pytest.raises(TimeoutError, match="seems stuck"):
            writer.add(1, {"view": np.zeros((4, 1_000_000), np.float32)[1, :2]})  # over budget: waits
    finally:
        release.set()
        writer.close()
