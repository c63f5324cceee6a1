"""The seed's place of ``display_datapoint``; it lives with the Datapoint tab
(``runners/eval_viewer/datapoint/display_datapoint.py``)."""

from runners.eval_viewer.datapoint.display_datapoint import display_datapoint

__all__ = ["display_datapoint"]
