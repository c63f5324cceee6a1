"""MaskDebugger through real SequentialDebugger epochs and pages: the masks, the prompt and the scores against an
independent computation, batched equal to alone, and an error record per broken datapoint while the rest goes on."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from data.datasets.prompted_masks import collate_prompted_masks
from data.datasets.prompted_shapes import PromptedShapesDataset
from debuggers.mask_debugger import MaskDebugger
from models.promptable_segmenter import PromptableSegmenter
from tests.compat.harness import assert_same_outputs
from tests.debuggers.library import entry, run_batches
from tests.metrics.test_segmentation_metric import numpy_iou_dice

MASKS = [entry("masks", MaskDebugger, iou_key="iou_predictions")]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return PromptableSegmenter().eval()


def batches_of(datapoints, size):
    return [collate_prompted_masks(datapoints[start:start + size]) for start in range(0, len(datapoints), size)]


def test_masks_prompt_and_scores_of_a_promptable_model(tmp_path, model):
    dataset = PromptedShapesDataset(6, split="val")
    datapoints = [dataset[i] for i in range(6)]
    _, batched = run_batches(model, batches_of(datapoints, 4), tmp_path / "batched", MASKS, strict=True)
    for i, datapoint in enumerate(datapoints):
        output = batched[i]["masks"]
        with torch.no_grad():
            direct = model(collate_prompted_masks([datapoint])["inputs"])
        logits = direct["masks"][0, 0].numpy()
        label = datapoint["labels"]["mask"][0].numpy()
        assert output["kind"] == "mask" and output["num_classes"] == 1
        np.testing.assert_array_equal(output["label_mask"], label[None].astype(np.uint8))
        predicted = logits > 0
        assert (output["predicted_mask"][0] != predicted).sum() <= 2  # float rounding at logit 0 only
        np.testing.assert_allclose(output["probability"][0], 1 / (1 + np.exp(-logits)), atol=2e-3)
        assert output["iou"] == pytest.approx(numpy_iou_dice(predicted, label > 0.5)[0], abs=0.01)
        assert output["predicted_iou"] == pytest.approx(float(direct["iou_predictions"][0]), abs=1e-5)
        np.testing.assert_allclose(output["point"], datapoint["inputs"]["point"][None].numpy())
    _, alone = run_batches(model, batches_of(datapoints, 1), tmp_path / "alone", MASKS, strict=True)
    assert_same_outputs(batched, alone, atol=1e-3)


class HalfResolutionSegmenter(torch.nn.Module):
    """Class logits at half the image's resolution, as SegFormer gives them."""

    def __init__(self, classes: int = 3) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, classes, 3, stride=2, padding=1)

    def forward(self, inputs):
        return {"logits": self.conv(inputs["image"])}


def test_class_maps_with_ignored_pixels(tmp_path):
    torch.manual_seed(1)
    model = HalfResolutionSegmenter().eval()
    images, labels = torch.randn(3, 3, 8, 8), torch.randint(0, 3, (3, 8, 8))
    labels[1, :2] = 255
    batch = {"inputs": {"image": images}, "labels": {"seg": labels}, "meta_info": {"idx": torch.arange(3)}}
    debuggers = [entry("masks", MaskDebugger, output_key="logits", label_key="seg", point_key=None)]
    _, outputs = run_batches(model, [batch], tmp_path, debuggers, strict=True)
    with torch.no_grad():
        upsampled = F.interpolate(model(batch["inputs"])["logits"], size=(8, 8), mode="bilinear", align_corners=False)
    output = outputs[1]["masks"]
    assert output["num_classes"] == 3 and "point" not in output
    np.testing.assert_array_equal(output["label_mask"][0], labels[1].numpy())
    np.testing.assert_array_equal(output["predicted_mask"][0], upsampled[1].argmax(dim=0).numpy())
    np.testing.assert_allclose(output["probability"][0], upsampled[1].softmax(dim=0).amax(dim=0).numpy(), atol=2e-3)


def test_a_broken_datapoint_gets_an_error_record_and_the_others_their_masks(tmp_path, model):
    dataset = PromptedShapesDataset(4, split="val")
    datapoints = [dataset[i] for i in range(4)]
    datapoints[1] = {**datapoints[1], "labels": {"mask": torch.zeros(1, 30, 32)}}
    datapoints[2] = {**datapoints[2], "inputs": {**datapoints[2]["inputs"], "point": torch.tensor([-5.0, 3.0])}}
    datapoints[3] = {**datapoints[3], "labels": {"mask": torch.zeros(1, 32, 32)}}
    _, outputs = run_batches(model, batches_of(datapoints, 4), tmp_path, MASKS, strict=True)
    assert outputs[0]["masks"]["kind"] == "mask"
    for idx, words in ((1, "shape (1, 30, 32)"), (2, "outside the 32x32 image"), (3, "the mask is empty")):
        record = outputs[idx]["masks"]
        assert record["kind"] == "error" and record["type"] == "InputError" and words in record["message"]
