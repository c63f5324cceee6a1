"""One module per part of a datapoint: inputs, labels, meta info, debug outputs; ``display_datapoint`` joins them."""

from runners.eval_viewer.datapoint.display_datapoint import display_datapoint

__all__ = ["display_datapoint"]
