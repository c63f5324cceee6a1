"""Ids of the Export button and its download (the browser sends them clicks only)."""

from runners.eval_viewer.shared.sends import Sends

EXPORT_BUTTON = "export-button"
EXPORT_DOWNLOAD = "export-download"

SENDS: Sends = {}
