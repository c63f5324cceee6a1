"""Ids of the run, epoch and metric pickers, the epoch's badges and the page's refresh, and what the browser sends
them."""

from runners.eval_viewer.shared.sends import OPTIONS, TEXTS, Sends, text, whole

RUN_SELECT = "run-select"
EPOCH_SELECT = "epoch-select"
FOLLOW_LATEST = "follow-latest"  # tick box: a new epoch of the run is opened as it comes
EPOCHS_RUN = "epochs-run"  # the run whose epochs EPOCH_SELECT lists: a run switch is when RUN_SELECT differs
METRIC_SELECT = "metric-select"
EPOCH_BADGES = "epoch-badges"
NEAREST_DEBUG_EPOCH = "nearest-debug-epoch"  # button: switch to the nearest epoch with debug outputs
MESSAGES = "viewer-messages"
REFRESH = "refresh-tick"  # ticked by assets/refresh.js when the runs on disk changed (controls/refresh.py)
REFRESH_POLL = "refresh-poll"  # what assets/refresh.js asks about: its period and what the page was built from
VIEW_BUILT_FROM = "view-built-from"  # the run, epoch and disk state the shown view was built from (refresh.js)

SENDS: Sends = {
    (RUN_SELECT, "value"): text, (RUN_SELECT, "options"): OPTIONS,
    (EPOCH_SELECT, "value"): text, (EPOCH_SELECT, "options"): OPTIONS,
    (EPOCHS_RUN, "data"): text, (FOLLOW_LATEST, "value"): TEXTS, (METRIC_SELECT, "value"): text,
    (REFRESH, "data"): whole,
}
