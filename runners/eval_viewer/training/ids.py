"""Ids of the Training tab, and what the browser sends them."""

from runners.eval_viewer.shared.sends import Sends, record, text, whole

TAB_TRAINING = "tab-training"
TRAINING_SUMMARY = "training-summary"  # what was recorded, the first non-finite step, gradients not updating
TRAINING_FIGURES = "training-figures"  # the graphs, hidden while there is nothing to draw
TRAINING_LOSS_CHART = "training-loss"
TRAINING_GRAD_CHART = "training-grad-norms"
TRAINING_UPDATE_CHART = "training-update-ratios"
TRAINING_LAYER_SELECT = "training-layer"
TRAINING_HISTOGRAM_CHART = "training-histograms"
TRAINING_SHOWN = "training-shown"  # {run, version, layer} drawn: a refresh that changes none redraws nothing
TRAINING_TICK = "training-tick"  # the page's refresh ticks while the tab is shown (none reach the server otherwise)
TRAINING_NONFINITE_NOTE = "training-nonfinite"
TRAINING_STATES_TABLE = "training-grad-states"
TRAINING_PROFILE = "training-profile"  # the steps config['profiler'] recorded
TRAINING_PROFILE_TABLE = "training-profile-ops"  # their ops with the most time of their own

SENDS: Sends = {(TRAINING_LAYER_SELECT, "value"): whole, (TRAINING_TICK, "data"): whole,
                (TRAINING_SHOWN, "data"): record(run=text, version=text, layer=whole)}
