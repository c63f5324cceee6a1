"""SegmentationMetric, PromptedMaskCriterion and collate_prompted_masks against hand-written NumPy."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from criteria.mask_criterion import PromptedMaskCriterion
from data.datasets.prompted_masks import collate_prompted_masks
from data.datasets.prompted_shapes import PromptedShapesDataset
from metrics.segmentation_metric import SegmentationMetric


def numpy_iou_dice(predicted: np.ndarray, labelled: np.ndarray) -> tuple[float, float]:
    intersection = np.logical_and(predicted, labelled).sum()
    union = np.logical_or(predicted, labelled).sum()
    sizes = predicted.sum() + labelled.sum()
    return (intersection / union, 2 * intersection / sizes) if union else (math.nan, math.nan)


def test_binary_masks_against_numpy():
    torch.manual_seed(0)
    logits = torch.randn(4, 1, 8, 8)
    labels = (torch.rand(4, 1, 8, 8) > 0.6).float()
    scores = SegmentationMetric()({"masks": logits}, {"mask": labels})
    for b in range(4):
        iou, dice = numpy_iou_dice(logits[b].numpy() > 0, labels[b].numpy() > 0.5)
        assert scores["iou"][b].item() == pytest.approx(iou)
        assert scores["dice"][b].item() == pytest.approx(dice)


def test_coarse_logits_are_upsampled_to_the_label():
    torch.manual_seed(1)
    logits, labels = torch.randn(2, 1, 4, 4), (torch.rand(2, 1, 8, 8) > 0.5).float()
    scores = SegmentationMetric()({"masks": logits}, {"mask": labels})
    upsampled = F.interpolate(logits, size=(8, 8), mode="bilinear", align_corners=False)
    assert scores["iou"][1].item() == pytest.approx(numpy_iou_dice(upsampled[1].numpy() > 0, labels[1].numpy())[0])


def test_class_maps_give_the_mean_over_present_classes_and_skip_ignored_pixels():
    torch.manual_seed(2)
    logits = torch.randn(3, 4, 6, 6)
    labels = torch.randint(0, 3, (3, 6, 6))
    labels[0, :2] = 255
    scores = SegmentationMetric(output_key="logits", label_key="seg")({"logits": logits}, {"seg": labels})
    for b in range(3):
        predicted, label = logits[b].argmax(dim=0).numpy(), labels[b].numpy()
        counted = label != 255
        per_class = [numpy_iou_dice((predicted == c) & counted, (label == c) & counted) for c in range(4)]
        expected = np.nanmean([iou for iou, _ in per_class])
        assert scores["iou"][b].item() == pytest.approx(expected)


def test_a_clip_scores_the_mean_over_its_frames_and_the_predicted_iou_beside_it():
    torch.manual_seed(3)
    logits, labels = torch.randn(2, 3, 1, 8, 8), (torch.rand(2, 3, 1, 8, 8) > 0.5).float()
    predicted = torch.rand(2, 3)
    scores = SegmentationMetric(iou_key="iou")({"masks": logits, "iou": predicted}, {"mask": labels})
    frames = [numpy_iou_dice(logits[1, t].numpy() > 0, labels[1, t].numpy())[0] for t in range(3)]
    assert scores["iou"][1].item() == pytest.approx(np.mean(frames))
    assert scores["predicted_iou"][1].item() == pytest.approx(predicted[1].mean().item())
    assert scores["iou_prediction_error"][1].item() == pytest.approx(abs(predicted[1].mean().item() - np.mean(frames)))


def test_broken_datapoints_score_nothing_and_summaries_skip_them():
    metric = SegmentationMetric()
    labels = {"mask": torch.ones(2, 1, 4, 4), "valid": torch.tensor([True, False])}
    scores = metric({"masks": torch.ones(2, 1, 4, 4)}, labels)
    assert scores["iou"][0].item() == 1.0 and math.isnan(scores["iou"][1].item())
    metric.add_to_buffer([5, 6], scores)
    summary = metric.summarize()
    assert summary["aggregated"]["iou"] == 1.0 and math.isnan(summary["per_datapoint"]["iou"][1])


def test_a_missing_output_names_the_keys_and_the_argument():
    with pytest.raises(Exception, match="output_key"):
        SegmentationMetric()({"logits": torch.zeros(1, 1, 4, 4)}, {"mask": torch.zeros(1, 1, 4, 4)})


def test_criterion_is_bce_plus_dice_plus_iou_error():
    torch.manual_seed(4)
    logits, labels = torch.randn(2, 1, 6, 6), (torch.rand(2, 1, 6, 6) > 0.5).float()
    predicted_iou = torch.rand(2)
    loss = PromptedMaskCriterion()({"masks": logits, "iou_predictions": predicted_iou}, {"mask": labels})
    expected = []
    for b in range(2):
        p, t = torch.sigmoid(logits[b]), labels[b]
        bce = F.binary_cross_entropy(p, t).item()
        dice = 1 - (2 * (p * t).sum().item() + 1) / (p.sum().item() + t.sum().item() + 1)
        iou = numpy_iou_dice(logits[b].numpy() > 0, t.numpy() > 0.5)[0]
        expected.append(bce + dice + (predicted_iou[b].item() - iou) ** 2)
    assert loss.item() == pytest.approx(np.mean(expected), rel=1e-5)


def test_criterion_takes_the_best_of_several_masks_and_leaves_broken_datapoints_out():
    labels = {"mask": torch.ones(2, 1, 4, 4), "valid": torch.tensor([True, False])}
    good, bad = torch.full((1, 4, 4), 9.0), torch.full((1, 4, 4), -9.0)
    outputs = {"masks": good[None].expand(2, 1, 4, 4), "all_masks": torch.stack([torch.cat([bad, good])] * 2),
               "iou_predictions": torch.ones(2), "all_iou_predictions": torch.tensor([[0.0, 1.0], [0.0, 1.0]])}
    loss = PromptedMaskCriterion()(outputs, labels)
    assert loss.item() < 0.01  # the good mask's loss; IoU predictions exact; the broken datapoint adds nothing


def _datapoint(idx, mask, point, size=8):
    return {"inputs": {"image": torch.zeros(3, size, size), "point": torch.tensor(point, dtype=torch.float32)},
            "labels": {"mask": mask}, "meta_info": {"idx": idx}}


def test_broken_datapoints_are_marked_and_repaired_so_the_batch_collates():
    good = torch.zeros(1, 8, 8)
    good[0, 2:5, 2:5] = 1
    batch = collate_prompted_masks([
        _datapoint(0, good, [3.5, 3.5]),
        _datapoint(1, torch.ones(1, 6, 8), [3.5, 3.5]),  # the wrong shape
        _datapoint(2, good, [20.0, 3.0]),  # outside the 8x8 image
        _datapoint(3, torch.zeros(1, 8, 8), [3.5, 3.5]),  # empty
    ])
    errors = batch["meta_info"]["input_error"]
    assert errors[0] == ""
    assert "shape (1, 6, 8)" in errors[1] and "(1, 8, 8)" in errors[1]
    assert "outside the 8x8 image" in errors[2] and "(x, y)" in errors[2]
    assert "empty" in errors[3]
    assert batch["labels"]["valid"].tolist() == [True, False, False, False]
    assert batch["labels"]["mask"].shape == (4, 1, 8, 8) and batch["labels"]["mask"][1].sum() == 0
    assert batch["inputs"]["point"][2].tolist() == [8.0, 3.0]  # moved into the image for the model


def test_sound_datapoints_pass_unchanged():
    dataset = PromptedShapesDataset(4)
    batch = collate_prompted_masks([dataset[i] for i in range(4)])
    assert batch["labels"]["valid"].all() and batch["meta_info"]["input_error"] == [""] * 4
    assert torch.equal(batch["labels"]["mask"][2], dataset[2]["labels"]["mask"])
