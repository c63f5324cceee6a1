"""Records every debugger output can hold, and what each output kind is called.

Ready-made debuggers return a dict with a ``'kind'`` key so that a view can be
chosen without guessing from shapes; outputs of user debuggers without one are
shown generically. Errors and layers that did not run are records too, so a
datapoint's outputs always say what happened to every debugger.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

KIND_ERROR = "error"
KIND_NOT_RUN = "not_run"

# Kinds of the ready-made debuggers' outputs. Shapes are per datapoint, as a page holds them.
KIND_FEATURE_MAP = "feature_map"
KIND_STATISTICS = "statistics"
KIND_LAYER_OUTPUT = "layer_output"
KIND_ATTENTION = "attention"
KIND_CAM = "cam"
KIND_NAN_ORIGIN = "nan_origin"
KIND_GRADIENT_FLOW = "gradient_flow"
KIND_CAPTURED_STATES = "captured_states"
KIND_MASK = "mask"
IGNORED = 255  # where a mask output's label map says 'not counted'
# Kinds of the states inside a captured_states output (chosen from the state's name).
KIND_EMBEDDING = "embedding"
KIND_POSITION_ENCODING = "position_encoding"
KIND_TENSOR = "tensor"

ROOT_MODULE_NAME = "(model)"  # how outputs name the model itself, whose named_modules() path is ''


@dataclass(frozen=True)
class Field:
    """One field of an output kind: the types its value has as a page holds it (arrays as NumPy arrays, numbers
    as int or float; ``NONE`` among them where it may be None), whether every output of the kind has it, and what
    it holds. Shapes are per datapoint."""

    types: tuple[type, ...]
    doc: str
    required: bool = True


ARRAY, NUMBER, WHOLE, TEXT = (np.ndarray,), (int, float), (int,), (str,)
FLAG, RECORD, LIST, NONE = (bool,), (dict,), (list,), (type(None),)


def _fields(**fields: tuple) -> dict[str, Field]:
    return {name: Field(*spec) for name, spec in fields.items()}


_LAYER_STATISTICS = {name: (NUMBER, f"{name.replace('_', ' ')} of the layer's output") for name in (
    "mean", "std", "min", "max", "l1_norm", "l2_norm", "sparsity", "positive_ratio", "saturation_low",
    "saturation_high", "nonfinite_ratio")}

# The fields of each kind of output a debugger gives (a view picks the output's figures by its kind: each kind has its
# drawing function in the viewer's figure registry). A debugger's own output without a 'kind' is drawn generically.
KIND_FIELDS: dict[str, dict[str, Field]] = {
    KIND_ERROR: _fields(type=(TEXT, "the exception's class"), message=(TEXT, "what it said"),
                        traceback=(TEXT, "its last frames: the debugger raised on this datapoint's batch")),
    KIND_NOT_RUN: _fields(message=(TEXT, "the hooked layer (or model) did not run in this forward pass")),
    KIND_FEATURE_MAP: _fields(
        layer_name=(TEXT, "the layer"), feature_map=(ARRAY, "(C', H, W): the channels channel_indices"),
        channel_indices=(ARRAY, "(C',) of the layer's C channels"),
        stats=(RECORD, "{mean, std, min, max} of the whole map"), shape=(LIST, "[C, H, W] of the whole map")),
    KIND_STATISTICS: _fields(
        layer_name=(TEXT, "the layer"), module_type=(TEXT, "its class"), shape=(LIST, "of its output"),
        **_LAYER_STATISTICS, histogram=(ARRAY, "(bins,) counts"), histogram_edges=(ARRAY, "(bins+1,)"),
        sample_values=(ARRAY, "(<=100,) of the output's values"),
        channel_means=(ARRAY, "(C,), for an output with channels", False),
        channel_stds=(ARRAY, "(C,), for an output with channels", False)),
    KIND_LAYER_OUTPUT: _fields(
        layer_name=(TEXT, "the layer"), output=(ARRAY, "average-pooled over its positions, its units kept"),
        original_shape=(LIST, "before pooling"), downsample_factor=(WHOLE, "of the pooling"),
        layout=(TEXT, "'channels_first' (C, *positions) or 'tokens' (T, D): debuggers/feature_layout.py", False),
        token_weight=(ARRAY, "(T',) the real tokens each pooled block of a token output holds", False)),
    KIND_ATTENTION: _fields(
        layer_name=(TEXT, "the layer"), attention=(ARRAY, "(heads, Lq, Lk) cropped to the real tokens"),
        entropy_per_head=(ARRAY, "(heads,)"), max_attention=(NUMBER, "the largest weight"),
        grid=(LIST + NONE, "[h, w] of the key tokens (image patches), or None")),
    KIND_CAM: _fields(
        target_layer=(TEXT, "the layer"), cam=(ARRAY, "(H, W) in [0, 1]; a signal's or tokens' (T,), a volume's "
                                                      "(D, H, W)"), target_class=(WHOLE, "the class explained"),
        layer_size=(LIST, "the layer's positions the cam was upsampled from", False),
        target_score=(NUMBER, "its score"), raw_max=(NUMBER, "the upsampled cam's max, its divisor: cam * raw_max is "
                                                             "the cam before normalisation"),
        spatial=(RECORD, "{centroid_x, centroid_y (2-D, 3-D), centroid_z (3-D), centre_fraction, spread, entropy}",
                 False),
        predicted_class=(WHOLE, "the model's class", False), label_class=(WHOLE, "the label's, with labels", False),
        other_target=(RECORD + NONE, "{cam, target_class, target_score, raw_max} of the other class where label and "
                                     "prediction differ", False),
        region=(TEXT, "'all', 'predicted' or 'label': where a segmentation's score was summed", False),
        region_pixels=(NUMBER, "the pixels of that region", False)),
    KIND_NAN_ORIGIN: _fields(
        first_module=(TEXT + NONE, "the first module whose output held NaN/Inf, or None"),
        module_type=(TEXT + NONE, "its class"), first_module_index=(NUMBER, "its place in execution order (nan: none)"),
        input_min=(NUMBER, "of its input (nan if none)"), input_max=(NUMBER, "of its input (nan if none)"),
        bad_modules=(LIST, "the modules with NaN/Inf, in execution order"), modules_checked=(WHOLE, "module calls"),
        batch_dim_unknown=(LIST, "why a non-finite output could not be attributed to a datapoint")),
    KIND_GRADIENT_FLOW: _fields(
        layers=(LIST, "names"), grad_norms=(ARRAY, "(L,)"), missing=(ARRAY, "(L,) bool"), zero=(ARRAY, "(L,) bool"),
        below_rounding=(ARRAY, "(L,) bool"), frozen=(LIST + ARRAY, "(L,) bool"),
        loss=(NUMBER, "the loss the gradients are of", False)),
    KIND_CAPTURED_STATES: _fields(
        states=(RECORD, "{component: {state: record}}, each record as STATE_FIELDS gives its kind's"),
        frames=(RECORD, "{every_n_frames, kept, dropped}: the frames a FrameCaptureDebugger kept", False)),
    KIND_MASK: _fields(
        label_mask=(ARRAY, "(S, H, W) uint8: 0/1 masks, or class indices with 255 ignored"),
        predicted_mask=(ARRAY, "(S, H, W) uint8, as label_mask"), probability=(ARRAY, "(S, H, W) float16"),
        iou=(NUMBER, "of the prediction"), dice=(NUMBER, "of the prediction"),
        mask_iou=(ARRAY, "(S,) per mask"), num_classes=(WHOLE, "1 for 0/1 masks"),
        mask_step=(WHOLE, "the stride the maps were kept at (1: every pixel; points stay in the image's pixels)"),
        point=(ARRAY, "(N, 2) (x, y) prompt pixels", False),
        predicted_iou=(NUMBER, "for a model that predicts its IoU", False),
        mask_predicted_iou=(ARRAY, "(S,), for a model that predicts its IoU", False)),
}


def _state(data: tuple[type, ...], doc: str) -> dict[str, Field]:
    return _fields(data=(data, doc), metadata=(RECORD, "what the capture point declared (batch_dim, grid, ...)"),
                   unsplit=(LIST, "parts that could not be split by datapoint"),
                   shared=(FLAG, "declared without a batch: the same for every datapoint"))


# The fields of a captured state (a record inside a captured_states output), by the state's kind.
STATE_FIELDS: dict[str, dict[str, Field]] = {
    KIND_ATTENTION: _state(ARRAY, "(heads, Lq, Lk) weights or scores"),
    KIND_EMBEDDING: _state(ARRAY, "(C, H, W), or (N, D) tokens on metadata['grid']"),
    KIND_POSITION_ENCODING: _state(ARRAY, "(N, D) or (C, H, W) encodings (metadata['grid'] gives the token grid)"),
    KIND_TENSOR: _state((object,), "any value a capture point gave, arrays as arrays"),
}


def error_output(exc: BaseException) -> dict[str, Any]:
    """What a debugger that raised leaves for the datapoints of its batch."""
    return {
        "kind": KIND_ERROR,
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(exc)[-3:]),
    }


def not_run_output(message: str) -> dict[str, Any]:
    return {"kind": KIND_NOT_RUN, "message": message}


def is_shared_record(output: Any) -> bool:
    """Error and not-run records are the same for every datapoint of a batch."""
    return isinstance(output, dict) and output.get("kind") in (KIND_ERROR, KIND_NOT_RUN)


class PerDatapoint(list):
    """A list with one entry per datapoint of the batch (plain lists are shared)."""


class AloneOutputs(PerDatapoint):
    """Each datapoint's whole output, from a debugger run on each datapoint alone (``debuggers/batch_mode.py``):
    a message about one names the path inside the output, as the debugger returned it."""
