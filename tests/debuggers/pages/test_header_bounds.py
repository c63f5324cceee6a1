"""A record's JSON header is bounded: the reader refuses a crafted one before parsing it, and the writer never
writes one the reader would refuse (an output too big for it becomes that debugger's error record)."""

from __future__ import annotations

import json
import os
import pickle
import tracemalloc

import numpy as np
import pytest
import torch

from debuggers.base_debugger import BaseDebugger
from debuggers.pages import encoding
from debuggers.pages import file_format as page_format
from debuggers.pages.encoding import MAX_HEADER_NODES, HeaderTooLargeError, RecordEncoder, header_nodes
from debuggers.pages.file_format import CorruptPageError, PageFile, load_page
from debuggers.pages.reader import load_debug_outputs
from debuggers.pages.values import MAX_OUTPUT_NODES, UnsupportedOutputError, to_page_value, value_nodes
from debuggers.pages.writer import PageWriter
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from tests.debuggers.library import entry, run_epoch

pytestmark = pytest.mark.timeout(120)


def write_epoch(epoch_dir, records: dict, monkeypatch=None) -> str:
    """``records`` ({idx: page value}) as an epoch's debugger folder, written by ``PageWriter``; with
    ``monkeypatch``, by a writer without the header bound (another tool, or an older Lantern)."""
    if monkeypatch is not None:
        monkeypatch.setattr(encoding, "MAX_HEADER_NODES", 10**9)
    with PageWriter(64 * 2**20) as writer:
        writer.start_epoch(os.path.join(epoch_dir, "debugger"))
        for idx, value in records.items():
            writer.add_converted([idx], [value])
        writer.flush()
    if monkeypatch is not None:
        monkeypatch.undo()
    return str(epoch_dir)


def test_a_header_of_many_empty_lists_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    """``{"d":[["x",[[],[],...]]]}``: a valid page whose header, parsed, took 37 times its size in memory
    and seconds per MB. It is refused in place, having cost a few times its size at most; the other datapoint
    of the page still reads."""
    epoch = write_epoch(tmp_path, {0: {"x": [[] for _ in range(500_000)]}, 1: {"x": np.arange(3)}}, monkeypatch)
    page = tmp_path / "debugger" / "page_0.pkl"
    outputs = load_debug_outputs(epoch)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptPageError, match=r"datapoint 0 has a header made of 1000\d+ JSON values.*"
                                                   r"not read\. Delete the page and rerun the epoch"):
            outputs[0]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * page.stat().st_size
    np.testing.assert_array_equal(outputs[1]["x"], np.arange(3))
    with pytest.raises(CorruptPageError, match="datapoint 0 has a header made of"):
        load_page(str(page))
    with pytest.raises(CorruptPageError, match="datapoint 0 has a header made of"):
        dict(outputs.page_by_page())


def test_a_header_over_the_length_bound_is_refused_unread(tmp_path, monkeypatch):
    epoch = write_epoch(tmp_path, {0: {"x": "a" * 1000}})
    monkeypatch.setattr(page_format, "MAX_HEADER_BYTES", 500)
    with pytest.raises(CorruptPageError, match=r"has a header 10\d\d bytes long \(at most 500\)"):
        load_debug_outputs(epoch)[0]


def test_commas_and_brackets_inside_strings_are_not_values(tmp_path):
    """A string of 300,000 commas is one value: written, and read back equal."""
    text = "[{," * 100_000
    epoch = write_epoch(tmp_path, {0: to_page_value({"caption": text, "tokens": [text, "b"]})})
    assert load_debug_outputs(epoch)[0] == {"caption": text, "tokens": [text, "b"]}


STRUCTURES = [
    {"a": 1.0, "b": [1, 2, 3], "c": np.zeros((2, 3)), "d": (1, "x,y"), "e": {}, "f": [], "g": b"ab", "h": 1j,
     "i": None, "j": np.zeros(()), "k": True},
    {"x": [[] for _ in range(10)]},
    {"x": list(range(100))},
    {"x": {str(i): [i, {"y": i}] for i in range(50)}},
    {0: [(1, 2), (3, [4, 5])], 1: {"z": np.ones((2, 2, 2, 2))}},
]


@pytest.mark.parametrize("value", STRUCTURES, ids=range(len(STRUCTURES)))
def test_the_conversion_bound_counts_at_least_what_the_header_holds(value):
    """``value_nodes`` (the writer's estimate, before any encoding) is never below ``header_nodes`` of the real
    header, so an output within its bound is within the reader's."""
    encoder = RecordEncoder(0)
    _, offset, length = encoder.record(7, value)
    data = b"".join(bytes(memoryview(buffer).cast("B")) for buffer in encoder.take())
    header = data[offset:offset + length]
    json.loads(header)
    assert value_nodes(value, 10**9) >= header_nodes(header) > 0


class HugeList(BaseDebugger):
    """Returns a Python list of 500,000 numbers: one value per datapoint in a page's record header."""

    def __call__(self, datapoint, model):
        return {"values": list(range(500_000))}


class ImageMean(BaseDebugger):
    def __call__(self, datapoint, model):
        return {"mean": datapoint["inputs"]["image"].mean(dim=(1, 2, 3))}


def test_an_output_too_big_for_a_header_is_that_debugger_s_error_record_and_the_epoch_goes_on(model, tmp_path):
    images = torch.randn(8, 3, 16, 16)
    summary, outputs = run_epoch(model, images, tmp_path, 4, [entry("huge", HugeList), entry("mean", ImageMean)])
    assert "error" not in summary and sorted(outputs) == list(range(8))
    for idx in range(8):
        huge = outputs[idx]["huge"]
        assert huge["kind"] == "error" and huge["type"] == "UnsupportedOutputError"
        assert f"at most {MAX_OUTPUT_NODES} for one output" in huge["message"]
        assert "return it as an array or tensor" in huge["message"]
        assert outputs[idx]["mean"]["mean"] == pytest.approx(float(images[idx].mean()), rel=1e-5)


def test_the_seed_s_add_to_buffer_records_an_error_for_an_output_too_big_for_a_header(tmp_path):
    debugger = SequentialDebugger([entry("mean", ImageMean)])
    debugger.reset_buffer(str(tmp_path / "debugger"))
    debugger.add_to_buffer(3, {"huge": list(range(500_000)), "small": [1, 2]})
    debugger.save_all(str(tmp_path / "debugger"))
    debugger.close()
    outputs = load_debug_outputs(str(tmp_path))[3]
    assert outputs["huge"]["kind"] == "error" and "return it as an array or tensor" in outputs["huge"]["message"]
    assert outputs["small"] == [1, 2]


def test_the_page_writer_refuses_a_record_over_the_bound_and_takes_the_next(tmp_path):
    """``add`` converts a whole record: five outputs of 60,000 numbers are over the reader's bound together."""
    with PageWriter(2**20) as writer:
        writer.start_epoch(str(tmp_path / "debugger"))
        with pytest.raises(UnsupportedOutputError, match="datapoint idx=0: .*array or tensor"):
            writer.add(0, {f"part{i}": list(range(60_000)) for i in range(5)})
        writer.add(1, {"part": list(range(60_000))})
        writer.flush()
    outputs = load_debug_outputs(str(tmp_path))
    assert list(outputs) == [1] and outputs[1]["part"] == list(range(60_000))


@pytest.mark.parametrize("path", ["walk", "plan", "batch"])
def test_the_encoder_never_writes_a_header_the_reader_refuses(tmp_path, path):
    """A page value over the bound that skipped the conversion (``write_page``, ``add_converted``) is refused by
    the encoder, which stays as it was: the page then holds the other records, for Lantern's reader and for
    ``pickle.load``."""
    too_big = {"x": [[] for _ in range(MAX_HEADER_NODES)]}
    if path == "walk":
        too_big["raw"] = b"bytes are encoded by the walk alone"
    page = PageFile(str(tmp_path / "page_0.pkl"), 0)
    page.append(0, {"ok": np.arange(4)})
    with pytest.raises(HeaderTooLargeError, match=f"over what a page's reader accepts \\({MAX_HEADER_NODES} values"):
        if path == "batch":
            page.append_batch(list(range(10, 18)), [too_big] * 8)
        else:
            page.append(1, too_big)
    page.append(2, {"ok": np.arange(5)})
    page.seal()
    with open(tmp_path / "page_0.pkl", "rb") as file:
        unpickled = pickle.load(file)
    for loaded in (load_page(str(tmp_path / "page_0.pkl")), unpickled):
        assert sorted(loaded) == [0, 2]
        np.testing.assert_array_equal(loaded[2]["ok"], np.arange(5))
