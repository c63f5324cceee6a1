"""The seed's place of ``display_debug_outputs``; it lives with the Datapoint tab
(``runners/eval_viewer/datapoint/display_debug_outputs.py``)."""

from runners.eval_viewer.datapoint.display_debug_outputs import display_debug_outputs

__all__ = ["display_debug_outputs"]
