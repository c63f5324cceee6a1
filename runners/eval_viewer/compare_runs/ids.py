"""Ids of the Compare runs tab and its run-against-run table, and what the browser sends them."""

from runners.eval_viewer.shared.sends import Sends, anything, if_dict, list_of, record, text

TAB_COMPARE_RUNS = "tab-compare-runs"
COMPARE_RUN_SELECT = "compare-run-select"
COMPARE_RUN_EPOCH_SELECT = "compare-run-epoch-select"
COMPARE_RUNS_PANEL = "compare-runs-panel"
COMPARE_RUNS_SHOWN = "compare-runs-shown"  # the open idx, written only while Compare runs is the tab shown
COMPARE_RUNS_STATUS = "compare-runs-status"
COMPARE_RUNS_DRAWN = "compare-runs-drawn"
RUN_DIFF_SHOWN = "run-diff-shown"  # the two sides and the metric, written only while Compare runs is the tab shown
RUN_DIFF_QUERY = "run-diff-query"  # what the run-against-run table's rows are of (None: nothing to compare)
RUN_DIFF_SUMMARY = "run-diff-summary"
RUN_DIFF_TABLE = "run-diff-table"
RUN_DIFF_ROWS = "run-diff-rows"  # the server's answer to the table's request for rows (``row_grids.answer``)
RUN_DIFF_CAPTION = "run-diff-caption"
RUN_DIFF_ALL, RUN_DIFF_TO_WRONG, RUN_DIFF_TO_RIGHT = "run-diff-all", "run-diff-to-wrong", "run-diff-to-right"

SIDE = if_dict(record(epoch=text))  # a side's run is looked up only where it is text
SIDES = record(first=SIDE, second=SIDE, metric=text)  # the two sides and the metric
SENDS: Sends = {
    (COMPARE_RUN_SELECT, "value"): text, (COMPARE_RUN_EPOCH_SELECT, "value"): text,
    (COMPARE_RUNS_SHOWN, "data"): anything,  # {idx}: ``browser_input.datapoint_idx``
    (COMPARE_RUNS_DRAWN, "data"): list_of(anything),
    (RUN_DIFF_SHOWN, "data"): SIDES, (RUN_DIFF_QUERY, "data"): SIDES,
}
