"""Every ready-made debugger's real output, read back from real pages, is as its kind's fields say
(``debuggers.outputs.KIND_FIELDS``, and ``STATE_FIELDS`` for each captured state): each required field there, no
field its kind does not name, every value of a type the kind gives it."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from data.datasets.prompted_shapes import PromptedShapesDataset
from debuggers.capture_debugger import CaptureDebugger
from debuggers.frame_capture_debugger import FrameCaptureDebugger
from debuggers.mask_debugger import MaskDebugger
from debuggers.outputs import (
    KIND_CAPTURED_STATES,
    KIND_FIELDS,
    STATE_FIELDS,
    Field,
    error_output,
    not_run_output,
)
from debuggers.segmentation_gradcam_debugger import SegmentationGradCAMDebugger
from models.promptable_segmenter import PromptableSegmenter
from tests.debuggers.library import capture_epoch, entry, run_batches
from tests.debuggers.test_frame_capture_debugger import FrameByFrame, batches
from tests.debuggers.test_library_debuggers import build
from tests.debuggers.test_mask_debugger import batches_of


def problems(record: dict[str, Any], fields: dict[str, Field], where: str) -> list[str]:
    """What in ``record`` is not as ``fields`` say."""
    found = [f"{where} has no {name}" for name, field in fields.items() if field.required and name not in record]
    found += [f"{where}.{name} is a {type(value).__name__}, not one of {fields[name].types}"
              for name, value in record.items() if name in fields and not isinstance(value, fields[name].types)]
    return found + [f"{where}.{name} is no field of its kind" for name in record if name not in (*fields, "kind")]


def output_problems(output: dict[str, Any], where: str) -> list[str]:
    """``problems`` of an output against its kind's fields, and of each state it captured against its state's."""
    kind = output.get("kind")
    if kind not in KIND_FIELDS:
        return [f"{where} is of no known kind: {kind!r}"]
    found = problems(output, KIND_FIELDS[kind], where)
    if kind == KIND_CAPTURED_STATES:
        for component, states in output.get("states", {}).items():
            for state, record in states.items():
                place = f"{where}.states.{component}.{state}"
                found += problems(record, STATE_FIELDS[record["kind"]], place) if record.get("kind") in STATE_FIELDS \
                    else [f"{place} is of no known state kind: {record.get('kind')!r}"]
    return found


def every_output(epoch: dict[int, dict[str, Any]]) -> list[str]:
    return [problem for idx, outputs in epoch.items() for name, output in outputs.items()
            for problem in output_problems(output, f"{name} of datapoint {idx}")]


@pytest.mark.parametrize("name", ["cnn", "attention"])
def test_the_library_debuggers_outputs_are_as_their_kinds_say(name, tmp_path):
    model, debuggers = build(name)
    torch.manual_seed(1)
    epoch = capture_epoch(model, torch.randn(4, 3, 16, 16), tmp_path, 2, debuggers)
    assert len(epoch) == 4 and not every_output(epoch)


def test_the_segmentation_debuggers_outputs_are_as_their_kinds_say(tmp_path):
    torch.manual_seed(0)
    model = PromptableSegmenter().eval()
    last_conv = [name for name, module in model.named_modules() if isinstance(module, torch.nn.Conv2d)][-1]
    debuggers = [entry("masks", MaskDebugger, iou_key="iou_predictions"), entry("states", CaptureDebugger),
                 entry("cam", SegmentationGradCAMDebugger, target_layer=last_conv, output_key="masks", target_class=0)]
    dataset = PromptedShapesDataset(4, split="val")
    _, epoch = run_batches(model, batches_of([dataset[i] for i in range(4)], 2), tmp_path, debuggers, strict=True)
    assert {output["kind"] for output in epoch[0].values()} == {"mask", "captured_states", "cam"}
    assert not every_output(epoch)


def test_frame_captures_and_records_are_as_their_kinds_say(tmp_path):
    debugger = [entry("frames", FrameCaptureDebugger, every_n_frames=3)]
    _, epoch = run_batches(FrameByFrame(), batches(3), tmp_path, debugger, strict=True)
    assert not every_output(epoch)
    assert not output_problems(error_output(ValueError("broken")), "error") + output_problems(
        not_run_output("the layer did not run"), "not run")


def test_the_check_finds_a_missing_an_unknown_and_a_mistyped_field():
    cam = {"kind": "cam", "cam": [[0.5]], "target_class": 1, "target_score": 0.3, "raw_max": 2.0, "colour": "red"}
    assert output_problems(cam, "cam") == ["cam has no target_layer", "cam.cam is a list, not one of "
                                           "(<class 'numpy.ndarray'>,)", "cam.colour is no field of its kind"]
