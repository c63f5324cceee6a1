"""Batch values: a batch's outputs in column form, written without a walk of each datapoint, into pages that
hold exactly what the datapoints' split values hold."""

from __future__ import annotations

import os
import pickle

import joblib
import numpy as np
import pytest
import torch

from debuggers.batch_split import split_batch, split_batch_value
from debuggers.outputs import PerDatapoint, error_output
from debuggers.pages import file_format as page_format
from debuggers.pages.batch_values import DatapointValues, Rows, take_rows
from debuggers.pages.encoding import RecordEncoder
from debuggers.pages.file_format import load_page
from debuggers.pages.keep_policy import build_capture_policy
from debuggers.pages.values import held_storage
from debuggers.pages.writer import PageWriter
from tests.debuggers.pages.test_file_format import assert_same_value

pytestmark = pytest.mark.timeout(30)
BATCH = 12


def rich_output(generator: torch.Generator) -> dict:
    """Every kind of leaf a debugger's batch output has: batch tensors of several dtypes, 1-d numbers, shared
    numbers, strings and containers, PerDatapoint lists of one structure."""
    return {
        "fm": torch.randn(BATCH, 3, 4, generator=generator),
        "half": torch.randn(BATCH, 2, generator=generator).half(),
        "bf16": torch.randn(BATCH, 5, generator=generator).to(torch.bfloat16),
        "mean": torch.randn(BATCH, generator=generator),
        "ids": torch.arange(BATCH) * 7 - 30,
        "agrees": torch.ones(BATCH, dtype=torch.bool),
        "stats": {"max": torch.rand(BATCH, generator=generator), "shape": [3, 4], "kind": "feature_map", "scale": 0.5,
                  "per_row": PerDatapoint([{"n": i, "v": np.full(2, i, np.int16)} for i in range(BATCH)])},
        "pair": (torch.zeros(BATCH, 2), 3),
    }


def page_of(path: str, indices: list[int], values: list, batch_value=None) -> dict:
    page = page_format.PageFile(path, 0)
    page.append_batch(indices, values, None, batch_value)
    page.seal()
    return load_page(path)


def test_a_batch_value_writes_what_its_split_values_hold(tmp_path):
    output = rich_output(torch.Generator().manual_seed(0))
    rows, batch_value = split_batch_value(output, BATCH, "d")
    expected = split_batch(output, BATCH, "d")
    for row, value in zip(rows, expected):
        assert_same_value(row, value)
    indices = list(range(100, 100 + BATCH))
    values, batch = [{"d": row} for row in rows], {"d": batch_value}
    assert RecordEncoder(0).records(indices, values, None, batch) is not None  # one walk, one layout
    path = str(tmp_path / "page_0.pkl")
    written = page_of(path, indices, values, batch)
    with open(path, "rb") as file:
        unpickled = pickle.load(file)
    by_rows = page_of(str(tmp_path / "page_1.pkl"), indices, values)
    for loaded in (written, unpickled, joblib.load(path), by_rows):
        assert list(loaded) == indices
        for idx, value in zip(indices, values):
            assert_same_value(loaded[idx], value)


def alone(value, i: int):
    """Datapoint ``i``'s part of a batch output, as a batch of one: ``select_datapoint``, which slices a model's
    inputs, leaves NumPy arrays and ``PerDatapoint`` lists whole, and an output holds both."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return value[i:i + 1]
    if isinstance(value, PerDatapoint):
        return PerDatapoint([value[i]])
    if isinstance(value, dict):
        return {key: alone(item, i) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(alone(item, i) for item in value)
    return value


def test_each_datapoints_value_is_made_when_asked_for_and_is_its_split_alone():
    """``split_batch_value`` makes no datapoint's value until it is asked for; each is what the datapoint's part
    of the output, split as a batch of one, gives: arrays, Python numbers, strings, shared values."""
    output = {**rich_output(torch.Generator().manual_seed(2)), "names": np.array([f"n{i}" for i in range(BATCH)])}
    rows, _ = split_batch_value(output, BATCH, "d")
    assert isinstance(rows, DatapointValues) and len(rows) == BATCH
    expected = [split_batch(alone(output, i), 1, "d")[0] for i in range(BATCH)]
    for i in range(BATCH):
        assert_same_value(rows[i], expected[i])
    assert type(rows[3]["mean"]) is float and type(rows[3]["names"]) is str
    tail = rows[7:]
    assert isinstance(tail, DatapointValues) and len(tail) == BATCH - 7
    for value, wanted in zip(tail, expected[7:], strict=True):
        assert_same_value(value, wanted)
    with pytest.raises(IndexError):
        rows[BATCH]


@pytest.mark.parametrize("odd", ["per datapoint shapes", "varying bools", "complex", "big ints"])
def test_a_batch_value_without_one_structure_is_written_record_by_record(tmp_path, odd):
    output = {"x": torch.randn(BATCH, 4)}
    if odd == "per datapoint shapes":
        output["p"] = PerDatapoint([np.zeros(i % 3) for i in range(BATCH)])
    elif odd == "varying bools":
        output["b"] = torch.arange(BATCH) % 2 == 0
    elif odd == "complex":
        output["c"] = torch.randn(BATCH, dtype=torch.complex64)
    else:
        output["i"] = torch.arange(BATCH) + 2**40
    rows, batch_value = split_batch_value(output, BATCH)
    indices = list(range(BATCH))
    if odd != "big ints":  # big ints share a plan, but their opcodes are wider than the batch layout's
        assert RecordEncoder(0).records(indices, rows, None, batch_value) is None
    written = page_of(str(tmp_path / "page_0.pkl"), indices, rows, batch_value)
    for idx in indices:
        assert_same_value(written[idx], split_batch(output, BATCH)[idx])


def test_non_contiguous_arrays_in_a_batch_value_are_written_record_by_record(tmp_path):
    """Split values are contiguous (``to_page_value``); a batch value made by hand may hold views."""
    views = list(np.arange(12.0 * BATCH).reshape(BATCH, 3, 4)[:, :, ::2])
    indices, values = list(range(BATCH)), [{"p": view} for view in views]
    assert RecordEncoder(0).records(indices, values, None, {"p": Rows(views)}) is None
    written = page_of(str(tmp_path / "page_0.pkl"), indices, values, {"p": Rows(views)})
    for idx in indices:
        np.testing.assert_array_equal(written[idx]["p"], views[idx])


def test_rows_taken_from_a_batch_value_are_the_split_rows(tmp_path):
    output = rich_output(torch.Generator().manual_seed(1))
    rows, batch_value = split_batch_value(output, BATCH)
    for taken_rows in ([1, 4, 5, 11], slice(3, None)):
        positions = taken_rows if type(taken_rows) is list else list(range(BATCH))[taken_rows]
        taken = take_rows(batch_value, taken_rows)
        values = [rows[i] for i in positions]
        assert RecordEncoder(0).records(positions, values, None, taken) is not None
        written = page_of(str(tmp_path / f"page_{positions[0]}.pkl"), positions, values, taken)
        for i in positions:
            assert_same_value(written[i], rows[i])


def test_a_batch_value_keeps_alive_what_its_split_values_keep_alive():
    batch = torch.randn(BATCH, 64, 64)
    rows, batch_value = split_batch_value({"fm": batch, "mean": batch.mean(dim=(1, 2)), "name": "layer"}, BATCH)
    owners = {id(owner): nbytes for owner, nbytes in held_storage(batch_value)}
    split = {id(owner): nbytes for row in rows for owner, nbytes in held_storage(row)}
    assert owners.items() >= split.items() and batch.untyped_storage().nbytes() in owners.values()
    taken = take_rows(batch_value, [0, 5])  # views of the batch: the batch array stays the one owner
    assert {id(owner) for owner, _ in held_storage(taken)} >= {id(owner) for owner, _ in held_storage(rows[0])}
    assert isinstance(taken["fm"], Rows) and taken["fm"].entries[1].base is not None


def test_a_capture_policy_hands_the_writer_the_kept_rows_as_a_batch_value():
    output = {"fm": torch.randn(6, 2)}
    rows, batch_value = split_batch_value(output, 6)
    scores = {"accuracy": torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 1.0])}
    failing = build_capture_policy("failing", {"a": None, "b": None})
    idx, values, batch = failing.select(list(range(10, 16)), {"a": rows, "b": rows}, scores,
                                        {"a": batch_value, "b": batch_value})
    assert idx == [11, 13, 14] and list(batch) == ["a", "b"]
    for position, value in zip([1, 3, 4], values):
        np.testing.assert_array_equal(value["a"]["fm"], rows[position]["fm"])
    assert [entry.tobytes() for entry in batch["b"]["fm"].entries] == [rows[i]["fm"].tobytes() for i in [1, 3, 4]]
    mixed = build_capture_policy("all", {"a": None, "b": "failing"})  # datapoints keep different debuggers
    assert mixed.select(list(range(6)), {"a": rows, "b": rows}, scores, {"a": batch_value, "b": batch_value})[2] \
        is None
    worst = build_capture_policy({"worst": 2, "by": "accuracy", "higher_is_better": True}, {"a": None})
    assert worst.select(list(range(6)), {"a": rows}, scores, {"a": batch_value}) == ([], [], None)
    assert worst.finish()[2] is None  # held copies, of several batches


def test_an_error_record_shared_by_the_batch_is_one_structure(tmp_path):
    rows, batch_value = split_batch_value(error_output(ValueError("bad")), BATCH)
    indices = list(range(BATCH))
    assert RecordEncoder(0).records(indices, rows, None, batch_value) is not None
    written = page_of(str(tmp_path / "page_0.pkl"), indices, rows, batch_value)
    assert all(written[idx] == rows[0] for idx in indices)


def test_the_writer_splits_a_batch_value_across_pages(tmp_path):
    batches = [torch.randn(32, 16, 16) + b for b in range(4)]  # 1 KiB per datapoint
    with PageWriter(10_000) as writer:
        writer.start_epoch(str(tmp_path))
        for number, batch in enumerate(batches):
            rows, batch_value = split_batch_value({"fm": batch, "m": batch.mean(dim=(1, 2))}, 32)
            writer.add_converted(list(range(32 * number, 32 * number + 32)), rows, batch_value)
        summary = writer.flush()
    assert summary["datapoints"] == 128 and summary["pages"] > 10
    seen = {}
    for number in range(summary["pages"]):
        path = str(tmp_path / f"page_{number}.pkl")
        if number < summary["pages"] - 1:
            assert 10_000 <= os.path.getsize(path) < 10_000 + 1_500
        seen.update(load_page(path))
    assert sorted(seen) == list(range(128))
    for idx, value in seen.items():
        np.testing.assert_array_equal(value["fm"], batches[idx // 32][idx % 32].numpy())
        assert value["m"] == batches[idx // 32][idx % 32].mean().item()
