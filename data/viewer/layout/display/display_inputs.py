"""The seed's place of ``display_inputs``; it lives with the Datapoint tab
(``runners/eval_viewer/datapoint/display_inputs.py``)."""

from runners.eval_viewer.datapoint.display_inputs import display_inputs

__all__ = ["display_inputs"]
