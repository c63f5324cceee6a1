"""The seed's ``display_*`` modules, one per part of a datapoint (inputs, labels, meta info, debug outputs), each
re-exporting its function from the Datapoint tab (``runners/eval_viewer/datapoint/``); ``display_datapoint`` joins
them."""

from runners.eval_viewer.datapoint.display_datapoint import display_datapoint

__all__ = ["display_datapoint"]
