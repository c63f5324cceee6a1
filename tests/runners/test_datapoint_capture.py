"""The capture of what the viewer shows of each datapoint, with its real page writer and files."""

from __future__ import annotations

import logging

import numpy as np
import torch

from debuggers.pages.reader import DebugOutputs
from runners.datapoint_capture import CaptureLimits, DatapointCapture


def test_a_captured_part_a_page_cannot_hold_becomes_a_note_and_the_rest_is_kept(tmp_path):
    """A meta_info holding a Python list of 100,000 numbers per datapoint is more than a page's record header
    lists: that part is a note saying why, the inputs and labels are captured."""
    folder = str(tmp_path / "datapoints")
    capture = DatapointCapture(folder, CaptureLimits(), logging.getLogger("test"))
    images = torch.rand(2, 1, 4, 4)
    capture.add_batch({"inputs": {"image": images}, "labels": {"class": torch.tensor([1, 2])},
                       "meta_info": {"idx": torch.tensor([0, 1]), "tokens": [list(range(100_000))] * 2}})
    capture.finish()
    captured = DebugOutputs(folder)[1]
    np.testing.assert_array_equal(captured["inputs"]["image"], images[1].numpy())
    assert captured["labels"] == {"class": 2}
    assert captured["meta_info"].startswith("<not captured: debug output at 'meta_info.tokens' holds too many")
    assert "return it as an array or tensor" in captured["meta_info"]
