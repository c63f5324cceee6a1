"""docs/from_pylon.md's port, as written: its batch-first FeatureMapDebugger gives every datapoint what the Pylon
one it replaces gives it (run per datapoint), with the shape per datapoint."""

from __future__ import annotations

import os
import re

import numpy as np
import torch

from debuggers.forward_debugger import ForwardDebugger
from models import SmallCNN
from tests.debuggers.library import entry, run_epoch
from tests.runs import REPO_ROOT

PORT = re.compile(r"```python\n(   # Pylon: one datapoint per forward pass\n.*?)```", re.DOTALL)


def ported_classes():
    """The page's Pylon class and its Lantern port, each run from the page's text."""
    with open(os.path.join(REPO_ROOT, "docs", "from_pylon.md")) as f:
        block = PORT.search(f.read()).group(1)
    lines = [line[3:] for line in block.splitlines()]  # the block is indented in a list item
    split = next(i for i, line in enumerate(lines) if line.startswith("# Lantern:"))
    classes = []
    for part in (lines[:split], lines[split:]):
        namespace = {"ForwardDebugger": ForwardDebugger}
        exec("\n".join(part), namespace)  # noqa: S102 - the page's own code
        classes.append(namespace["FeatureMapDebugger"])
    return classes


def test_the_port_gives_each_datapoint_what_the_pylon_debugger_gives_it(tmp_path):
    pylon, lantern = ported_classes()
    assert lantern.batch_mode == "batched" and getattr(pylon, "batch_mode", None) is None
    torch.manual_seed(0)
    model = SmallCNN(widths=(4, 4, 8, 8)).eval()
    images = torch.randn(8, 3, 16, 16)
    _, outputs = run_epoch(model, images, tmp_path, 4, [entry("pylon", pylon, layer_name="backbone.layer3"),
                                                         entry("lantern", lantern, layer_name="backbone.layer3")])
    for idx in range(8):
        before, after = outputs[idx]["pylon"], outputs[idx]["lantern"]
        np.testing.assert_allclose(after["feature_map"], before["feature_map"])
        for key in ("mean", "std"):
            np.testing.assert_allclose(after["stats"][key], before["stats"][key], rtol=1e-5)
        assert before["shape"] == [1, *after["shape"]] == [1, 8, 2, 2]
