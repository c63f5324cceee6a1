"""Ids of the Compare epochs tab, and what the browser sends them."""

from runners.eval_viewer.shared.sends import TEXTS, Sends, anything, list_of

TAB_COMPARE_EPOCHS = "tab-compare-epochs"
COMPARE_EPOCHS_SELECT = "compare-epochs-select"
COMPARE_EPOCHS_PANEL = "compare-epochs-panel"
COMPARE_EPOCHS_NOTE = "compare-epochs-note"  # which epochs kept debug outputs, where some did not
COMPARE_EPOCHS_SHOWN = "compare-epochs-shown"  # the open idx, written only while Compare epochs is the tab shown
COMPARE_EPOCHS_STATUS = "compare-epochs-status"
COMPARE_EPOCHS_DRAWN = "compare-epochs-drawn"

SENDS: Sends = {(COMPARE_EPOCHS_SELECT, "value"): TEXTS,
                (COMPARE_EPOCHS_SHOWN, "data"): anything,  # {idx}: ``browser_input.datapoint_idx``
                (COMPARE_EPOCHS_DRAWN, "data"): list_of(anything)}
