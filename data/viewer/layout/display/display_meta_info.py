"""The seed's place of ``display_meta_info``; it lives with the Datapoint tab
(``runners/eval_viewer/datapoint/display_meta_info.py``)."""

from runners.eval_viewer.datapoint.display_meta_info import display_meta_info

__all__ = ["display_meta_info"]
