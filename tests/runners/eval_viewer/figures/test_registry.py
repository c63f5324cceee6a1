"""The figure registry: every kind of output (``debuggers.outputs.KIND_FIELDS``) and of captured state
(``STATE_FIELDS``) has the function that draws it, and the viewer, the comparisons and the export all draw through
it (what each draws is checked beside, in ``test_figures_by_kind.py`` and ``test_figures_drawn.py``)."""

from __future__ import annotations

import inspect

import numpy as np

from debuggers.outputs import KIND_FIELDS, STATE_FIELDS
from runners.eval_viewer.figures.context import DrawContext
from runners.eval_viewer.figures.registry import FIGURES, output_figures
from runners.eval_viewer.figures.states import STATE_FIGURES


def test_every_output_kind_and_state_kind_has_its_drawing_function():
    assert sorted(FIGURES) == sorted(KIND_FIELDS), "an output kind without a figure function, or one of no kind"
    assert sorted(STATE_FIGURES) == sorted(STATE_FIELDS), "a state kind without a figure function"


def test_every_drawing_function_takes_the_output_and_its_context():
    for kind, draw in FIGURES.items():
        assert list(inspect.signature(draw).parameters) == ["output", "context"], kind


def test_a_state_of_a_kind_a_newer_lantern_wrote_is_drawn_as_a_tensor():
    output = {"kind": "captured_states", "states": {"block": {"x": {"kind": "hologram", "data": np.ones((2, 3)),
                                                                    "metadata": {}, "unsplit": [], "shared": False}}}}
    (figure,) = output_figures(output, DrawContext())
    assert figure.layout.title.text.startswith("block.x [2, 3]")
