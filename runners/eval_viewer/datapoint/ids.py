"""Ids of the Datapoint tab, and what the browser sends them."""

from runners.eval_viewer.shared.sends import TEXTS, Sends

TAB_DATAPOINT = "tab-datapoint"
DATAPOINT_PANEL = "datapoint-panel"
# The panel's status line says "loading datapoint N …" while it shows another datapoint than the one asked for
# (shared/pending.py); its DRAWN store holds what the panel shows (written with the panel).
DATAPOINT_STATUS = "datapoint-status"
DATAPOINT_DRAWN = "datapoint-drawn"
DEBUGGER_PICK = "debugger-pick"  # the debuggers whose outputs the Datapoint tab draws

SENDS: Sends = {(DEBUGGER_PICK, "value"): TEXTS, (DEBUGGER_PICK, "options"): TEXTS}
