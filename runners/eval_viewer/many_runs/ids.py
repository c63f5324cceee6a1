"""Ids of the Runs tab, and what the browser sends them."""

from runners.eval_viewer.shared.sends import TEXTS, Sends, whole

TAB_RUNS = "tab-runs"
RUNS_CHOSEN = "runs-chosen"  # the runs shown (their paths)
RUNS_NOTE = "runs-note"  # what each run has that is drawn, and what it lacks
RUNS_CURVES = "runs-curves"  # the overlaid curves (one figure, a panel per quantity)
RUNS_TABLE = "runs-table"  # their config differences and final scores (AG Grid, sorted in the browser)
RUNS_TICK = "runs-tick"  # the page's refresh ticks while the tab is shown

SENDS: Sends = {(RUNS_CHOSEN, "value"): TEXTS, (RUNS_TICK, "data"): whole}
