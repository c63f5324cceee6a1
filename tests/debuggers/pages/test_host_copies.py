"""Debugger outputs on a GPU reach the host through pinned buffers, one wait per batch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from debuggers.batch_split import split_batch
from debuggers.outputs import PerDatapoint
from debuggers.pages.host_copies import to_host


def outputs_on(device: str) -> dict:
    torch.manual_seed(0)
    return {"features": {"map": torch.randn(4, 3, 5, 5, device=device)[:, :, 1:4],  # not contiguous
                         "half": torch.randn(4, 2, device=device).to(torch.bfloat16)},
            "per": PerDatapoint(torch.arange(i + 1, device=device) for i in range(4)),
            "pair": (torch.ones(4, device=device), "name"), "n": 3}


def test_host_outputs_are_returned_as_they_are():
    outputs = outputs_on("cpu")
    assert to_host(outputs) is outputs


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on the development machine)")
def test_gpu_outputs_are_copied_into_pinned_buffers_and_split_like_host_outputs():
    on_gpu, on_host = outputs_on("cuda"), outputs_on("cpu")
    host = to_host(on_gpu)
    assert host["features"]["map"].is_pinned() and not host["features"]["map"].is_cuda
    assert type(host["per"]) is PerDatapoint and type(host["pair"]) is tuple and host["n"] == 3
    for got, expected in zip(split_batch(host, 4), split_batch(on_host, 4)):
        for key in ("map", "half"):
            np.testing.assert_array_equal(got["features"][key], expected["features"][key])
        np.testing.assert_array_equal(got["per"], expected["per"])
