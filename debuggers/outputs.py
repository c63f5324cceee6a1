"""Records every debugger output can hold, and what each output kind is called.

Ready-made debuggers return a dict with a ``'kind'`` key so that a view can be
chosen without guessing from shapes; outputs of user debuggers without one are
shown generically. Errors and layers that did not run are records too, so a
datapoint's outputs always say what happened to every debugger.
"""

from __future__ import annotations

import traceback
from typing import Any

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
# Kinds of the states inside a captured_states output (chosen from the state's name).
KIND_EMBEDDING = "embedding"
KIND_POSITION_ENCODING = "position_encoding"
KIND_TENSOR = "tensor"

ROOT_MODULE_NAME = "(model)"  # how outputs name the model itself, whose named_modules() path is ''

KIND_FIELDS: dict[str, str] = {
    KIND_ERROR: "type, message, traceback: the debugger raised on this datapoint's batch",
    KIND_NOT_RUN: "message: the hooked layer (or model) did not run in this forward pass",
    KIND_FEATURE_MAP: "layer_name, feature_map (C',H,W) of the channels channel_indices (C',), "
                      "stats {mean, std, min, max} of the whole map, shape (C,H,W)",
    KIND_STATISTICS: "layer_name, module_type, shape, mean, std, min, max, l1_norm, l2_norm, sparsity, "
                     "positive_ratio, saturation_low/high, nonfinite_ratio, channel_means/stds (C,), "
                     "histogram (bins,) with histogram_edges (bins+1,), sample_values (<=100,)",
    KIND_LAYER_OUTPUT: "layer_name, output (spatially average-pooled), original_shape, downsample_factor",
    KIND_ATTENTION: "layer_name, attention (heads,Lq,Lk) cropped to the real tokens, entropy_per_head (heads,), "
                    "max_attention, "
                    "grid [h, w] of the key tokens or None",
    KIND_CAM: "target_layer, cam (H,W) in [0, 1], target_class, target_score, raw_max (the upsampled cam's "
              "max, its divisor: cam * raw_max is the cam before normalisation), "
              "spatial {centroid_x, centroid_y, centre_fraction, spread, entropy}",
    KIND_NAN_ORIGIN: "first_module (name or None), module_type, input_min/input_max of first_module's input "
                     "(nan if none), bad_modules (names in execution order), modules_checked, "
                     "batch_dim_unknown (why a non-finite output could not be attributed)",
    KIND_GRADIENT_FLOW: "layers (names), grad_norms (L,), missing (L,) bool, zero (L,) bool, below_rounding (L,) "
                        "bool, frozen (L,) bool",
    KIND_CAPTURED_STATES: "states {component: {state: {kind, data, metadata, unsplit, shared}}}, each state's kind "
                          "one of attention, embedding, position_encoding, tensor; shared: declared without a batch",
    KIND_MASK: "label_mask and predicted_mask (S,H,W) uint8 (0/1 masks, or class indices with 255 ignored), "
               "probability (S,H,W) float16, point (N,2) (x, y) pixels or absent, iou, dice, mask_iou (S,), "
               "num_classes; predicted_iou and mask_predicted_iou (S,) for a model that predicts its IoU",
    KIND_EMBEDDING: "data (C,H,W) or (N,D) tokens (metadata['grid'] gives the token grid)",
    KIND_POSITION_ENCODING: "data (N,D) or (C,H,W) encodings (metadata['grid'] gives the token grid)",
    KIND_TENSOR: "data: any array captured by a capture point",
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
