"""Masks that are no masks are named, and a mask too large to draw is drawn smaller.

Before: a complex-valued label mask ended in torch's raw ``NotImplementedError: "gt_cpu" not implemented for
'ComplexFloat'``; a NaN label mask was taken as empty (IoU 0, no word); a crafted 8000 x 8000 mask output took
1.9 GB to draw in the viewer.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from debuggers.mask_debugger import MaskDebugger
from metrics.segmentation_metric import SegmentationMetric
from runners.eval_viewer.figures.masks import MAX_DRAWN_SIDE, mask_overlay_figure
from utils.errors import DatasetContractError, ModelContractError

LOGITS = torch.randn(2, 1, 8, 8, generator=torch.Generator().manual_seed(0))
MASK = (torch.rand(2, 1, 8, 8, generator=torch.Generator().manual_seed(1)) > 0.5).float()
NAN_MASK = MASK.clone()
NAN_MASK[0, 0, :2] = float("nan")
CASES = {  # name: (logits, label mask, error, what the message says)
    "complex label": (LOGITS, MASK.to(torch.complex64), DatasetContractError, "label mask is complex"),
    "NaN label": (LOGITS, NAN_MASK, DatasetContractError, "label mask holds NaN at 16 of 128 pixels"),
    "complex logits": (LOGITS.to(torch.complex64), MASK, ModelContractError, "mask logits are complex"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_metric_and_the_debugger_name_a_mask_that_is_no_mask(case):
    logits, mask, error, message = CASES[case]
    with pytest.raises(error, match=message):
        SegmentationMetric()({"masks": logits}, {"mask": mask})
    with pytest.raises(error, match=message):
        MaskDebugger()({"outputs": {"masks": logits}, "labels": {"mask": mask}, "inputs": {}, "meta_info": {}}, None)


def test_an_8000_pixel_mask_is_drawn_strided_to_the_bound():
    side = 8000
    rng = np.random.default_rng(0)
    label = (rng.random((1, side, side)) > 0.5).astype(np.uint8)
    output = {"label_mask": label, "predicted_mask": 1 - label, "iou": 0.0, "point": np.array([[4000.0, 2400.0]]),
              "probability": np.full((1, side, side), 0.25, dtype=np.float16)}
    figure = mask_overlay_figure(output)
    step = -(-side // MAX_DRAWN_SIDE)  # 16
    drawn = {trace.name: np.asarray(trace.z, dtype=np.float64) for trace in figure.data if trace.type == "heatmap"}
    assert all(z.shape == (side // step, side // step) for z in drawn.values())
    np.testing.assert_array_equal(np.nan_to_num(drawn["label mask"]), label[0, ::step, ::step])
    np.testing.assert_array_equal(np.nan_to_num(drawn["false negative"]), label[0, ::step, ::step])
    prompt = next(trace for trace in figure.data if trace.name == "prompt point")
    assert (prompt.x[0], prompt.y[0]) == (4000 / step - 0.5, 2400 / step - 0.5)  # where the prompt is, drawn smaller
