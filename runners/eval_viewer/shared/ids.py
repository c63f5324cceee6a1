"""The page's own component ids, which every feature reads: the tabs and the open datapoint. Each feature declares
its own ids (and what the browser may send them) in its ``ids.py``; callbacks, tests and docs refer to those names."""

from runners.eval_viewer.shared.sends import Sends, anything, text, whole

TABS = "datapoint-tabs"  # its value is the tab shown (each tab's ``TAB_*``)
SELECTED = "selected-datapoint"  # the open datapoint's idx
SELECTED_ROW = "selected-row"  # the open datapoint's row when it was opened (prev/next, where it is not loaded)

SENDS: Sends = {(TABS, "value"): text, (SELECTED, "data"): anything,  # the idx: ``browser_input.datapoint_idx``
                (SELECTED_ROW, "data"): whole}
