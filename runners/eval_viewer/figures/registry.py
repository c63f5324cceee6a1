"""Figures registered once by output kind: ``FIGURES`` gives every kind of debug output (``debuggers.outputs``'s
``KIND_FIELDS``) the function that draws it, all with one signature, the output and the ``DrawContext`` it is drawn
with; the states inside a ``captured_states`` output are drawn by their own kinds (``states.STATE_FIGURES``). The
Datapoint tab, the comparisons and the HTML export all draw through ``output_figures``; a test checks that every
kind has its function."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from debuggers import outputs as kinds
from debuggers.capture import split_frame
from runners.eval_viewer.figures.arrays import generic_figures
from runners.eval_viewer.figures.attention import attention_figures
from runners.eval_viewer.figures.base import Figures
from runners.eval_viewer.figures.cam import cam_figures
from runners.eval_viewer.figures.context import NO_CONTEXT, DrawContext
from runners.eval_viewer.figures.gradients import gradient_flow_figures, nan_origin_figures
from runners.eval_viewer.figures.layers import feature_map_figures, layer_output_figures, statistics_figures
from runners.eval_viewer.figures.masks import mask_figures
from runners.eval_viewer.figures.sam2 import is_sam2_states, sam2_state_figures
from runners.eval_viewer.figures.states import captured_states_figures

Draw = Callable[[dict[str, Any], DrawContext], Figures]


def record_figures(output: dict[str, Any], context: DrawContext) -> Figures:
    """None: an error or not-run record is shown as an alert beside the figures (``output_note``)."""
    return []


def captured_figures(output: dict[str, Any], context: DrawContext) -> Figures:
    """Each captured state drawn by its kind; the SAM2 guide's states, where the output holds them, by their own
    figures (``sam2.py``), drawn over the input image (a clip's first frame)."""
    states = output.get("states")
    if not is_sam2_states(states):
        return captured_states_figures(output)
    frames = context.frames
    image = context.image if context.image is not None or frames is None else frames[0]
    others = {component: component_states for component, component_states in states.items()
              if not is_sam2_states({component: component_states}) and split_frame(component)[1] is None}
    return [*sam2_state_figures(states, image), *captured_states_figures({"states": others})]


FIGURES: dict[str, Draw] = {
    kinds.KIND_ERROR: record_figures,
    kinds.KIND_NOT_RUN: record_figures,
    kinds.KIND_FEATURE_MAP: feature_map_figures,
    kinds.KIND_STATISTICS: statistics_figures,
    kinds.KIND_LAYER_OUTPUT: layer_output_figures,
    kinds.KIND_ATTENTION: attention_figures,
    kinds.KIND_CAM: cam_figures,
    kinds.KIND_NAN_ORIGIN: nan_origin_figures,
    kinds.KIND_GRADIENT_FLOW: gradient_flow_figures,
    kinds.KIND_CAPTURED_STATES: captured_figures,
    kinds.KIND_MASK: mask_figures,
}


def output_figures(output: Any, context: DrawContext = NO_CONTEXT) -> Figures:
    """Figures of one datapoint's output of one debugger, by its kind; an output of no known kind (a user's
    debugger's) is drawn generically (numbers in a table, every array by its shape)."""
    draw = FIGURES.get(output.get("kind")) if isinstance(output, dict) else None
    return generic_figures(output) if draw is None else draw(output, context)
