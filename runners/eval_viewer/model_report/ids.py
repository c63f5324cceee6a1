"""Ids of the Model report tab (the browser sends it nothing of its own)."""

from runners.eval_viewer.shared.sends import Sends

TAB_MODEL_REPORT = "tab-model-report"
MODEL_REPORT_PANEL = "model-report-panel"

SENDS: Sends = {}
