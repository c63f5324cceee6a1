"""Figures of any debug output: the kinds ``figures.py`` draws, and dense prediction's own (masks, the SAM2 guide's
states), drawn by their modules. The viewer, the comparison views and the HTML export all draw through
``output_figures``."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from debuggers import outputs as kinds
from runners.eval_viewer.figures.base import Figures, captured_states_figures, figures_for_output
from runners.eval_viewer.figures.masks import mask_figures
from runners.eval_viewer.figures.sam2 import FRAME, is_sam2_states, sam2_state_figures
from runners.eval_viewer.figures.values import to_numpy

IMAGE_CHANNELS = (1, 3)


def output_figures(output: Any, image: Optional[np.ndarray] = None, class_names: Optional[dict[int, str]] = None,
                   tokens: Optional[list[str]] = None, inputs: Optional[dict[str, Any]] = None,
                   calibration: Optional[dict[str, dict[str, np.ndarray]]] = None) -> Figures:
    """Figures for one datapoint's output of one debugger, drawn with what ``figure_context`` gives: its input
    ``image`` (and ``inputs``, where a clip's frames are), the epoch's ``class_names`` and ``calibration`` pairs
    (``runners.eval_viewer.backend.calibration``), its ``tokens``."""
    kind = output.get("kind") if isinstance(output, dict) else None
    if kind == kinds.KIND_MASK:
        return mask_figures(output, image, clip_frames(inputs), calibration)
    if kind == kinds.KIND_CAPTURED_STATES and is_sam2_states(output.get("states")):
        frames = clip_frames(inputs)
        return captured_sam2_figures(output, image if image is not None or frames is None else frames[0])
    return figures_for_output(output, image, class_names, tokens)


def captured_sam2_figures(output: dict[str, Any], image: Optional[np.ndarray] = None) -> Figures:
    """A ``CaptureDebugger`` output holding the SAM2 guide's states: their figures (``sam2_state_figures``), and
    every other component's states drawn by their kind."""
    states = output["states"]
    others = {component: component_states for component, component_states in states.items()
              if not is_sam2_states({component: component_states}) and not FRAME.match(component)}
    return [*sam2_state_figures(states, image), *captured_states_figures({"states": others})]


def clip_frames(inputs: Optional[dict[str, Any]]) -> Optional[np.ndarray]:
    """A clip's frames (T, C, H, W) among the inputs, if it has one."""
    for value in (inputs or {}).values():
        array = to_numpy(value)
        if array is not None and array.ndim == 4 and array.shape[1] in IMAGE_CHANNELS and array.dtype.kind == "f":
            return array
    return None
