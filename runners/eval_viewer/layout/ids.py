"""Stable ids of the viewer's Dash components: callbacks, tests and docs refer to these names."""

RUN_SELECT = "run-select"
EPOCH_SELECT = "epoch-select"
EPOCHS_RUN = "epochs-run"  # the run whose epochs EPOCH_SELECT lists: a run switch is when RUN_SELECT differs
METRIC_SELECT = "metric-select"
EPOCH_BADGES = "epoch-badges"
NEAREST_DEBUG_EPOCH = "nearest-debug-epoch"  # button: switch to the nearest epoch with debug outputs
MESSAGES = "viewer-messages"
REFRESH = "refresh-interval"

SCORE_CHART = "score-chart"  # drawn by assets/score_views.js from SCORE_CHART_DATA
SCORE_CHART_DATA = "score-chart-data"
SCORE_GRID = "score-grid"  # drawn by assets/score_views.js from SCORE_GRID_DATA (and the open datapoint's mark)
SCORE_GRID_DATA = "score-grid-data"
SCORES_MESSAGE = "scores-message"
TABLE = "datapoint-table"
TABLE_CAPTION = "table-caption"
TABLE_CLEAR_FILTERS = "table-clear-filters"
TABLE_QUERY = "table-query"  # run, epoch, metric and filter the table's rows are served for
TABLE_IDX_FILTER = "table-idx-filter"  # {run, epoch, idx}: the idx a Failures finding narrows that epoch to, or None
SELECTED_ROW = "selected-row"  # the open datapoint's row when it was opened (prev/next, where it is not loaded)
PREV_BUTTON = "prev-datapoint"
NEXT_BUTTON = "next-datapoint"
NAVIGATION_NOTE = "navigation-note"  # says why prev/next did nothing (the table's first or last row)
URL_STATE = "url-state"  # the address bar's writer (run, epoch, idx, tab, metric, sort) outputs to this store's id
EXPORT_BUTTON = "export-button"
EXPORT_DOWNLOAD = "export-download"
SELECTED = "selected-datapoint"

TABS = "datapoint-tabs"
TAB_DATAPOINT = "tab-datapoint"
TAB_COMPARE_EPOCHS = "tab-compare-epochs"
TAB_COMPARE_RUNS = "tab-compare-runs"
TAB_MODEL_REPORT = "tab-model-report"
TAB_FAILURES = "tab-failures"
TAB_GALLERY = "tab-gallery"
TAB_VALUES = (TAB_DATAPOINT, TAB_GALLERY, TAB_COMPARE_EPOCHS, TAB_COMPARE_RUNS, TAB_MODEL_REPORT, TAB_FAILURES)

DATAPOINT_PANEL = "datapoint-panel"
DEBUGGER_PICK = "debugger-pick"  # the debuggers whose outputs the Datapoint tab draws
COMPARE_EPOCHS_SELECT = "compare-epochs-select"
COMPARE_EPOCHS_PANEL = "compare-epochs-panel"
COMPARE_RUN_SELECT = "compare-run-select"
COMPARE_RUN_EPOCH_SELECT = "compare-run-epoch-select"
COMPARE_RUNS_PANEL = "compare-runs-panel"
COMPARE_EPOCHS_SHOWN = "compare-epochs-shown"  # the open idx, written only while Compare epochs is the tab shown
COMPARE_RUNS_SHOWN = "compare-runs-shown"  # the same for Compare runs
MODEL_REPORT_PANEL = "model-report-panel"
