"""The seed's place of ``display_labels``; it lives with the Datapoint tab
(``runners/eval_viewer/datapoint/display_labels.py``)."""

from runners.eval_viewer.datapoint.display_labels import display_labels

__all__ = ["display_labels"]
