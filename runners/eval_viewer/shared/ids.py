"""Stable ids of the viewer's Dash components: callbacks, tests and docs refer to these names."""

RUN_SELECT = "run-select"
EPOCH_SELECT = "epoch-select"
FOLLOW_LATEST = "follow-latest"  # tick box: a new epoch of the run is opened as it comes
EPOCHS_RUN = "epochs-run"  # the run whose epochs EPOCH_SELECT lists: a run switch is when RUN_SELECT differs
METRIC_SELECT = "metric-select"
EPOCH_BADGES = "epoch-badges"
NEAREST_DEBUG_EPOCH = "nearest-debug-epoch"  # button: switch to the nearest epoch with debug outputs
MESSAGES = "viewer-messages"
REFRESH = "refresh-tick"  # ticked by assets/refresh.js when the runs on disk changed (callbacks/refresh.py)
REFRESH_POLL = "refresh-poll"  # what assets/refresh.js asks about: its period and what the page was built from
VIEW_BUILT_FROM = "view-built-from"  # the run, epoch and disk state the shown view was built from (refresh.js)

SCORE_CHART = "score-chart"  # drawn by assets/score_views.js from SCORE_CHART_DATA
SCORE_CHART_DATA = "score-chart-data"
SCORE_GRID = "score-grid"  # drawn by assets/score_views.js from SCORE_GRID_DATA (and the open datapoint's mark)
SCORE_GRID_DATA = "score-grid-data"
SCORE_GRID_FILTERS = "score-grid-filters"  # the table's typed filters the grid is drawn for (its filter model)
SCORES_MESSAGE = "scores-message"
TABLE = "datapoint-table"
TABLE_CAPTION = "table-caption"
TABLE_CLEAR_FILTERS = "table-clear-filters"
TABLE_QUERY = "table-query"  # run, epoch, metric and filter the table's rows are served for
WRONG_ONLY = "wrong-only"  # tick box: only the datapoints whose prediction differs from their label
FILTER_CHIPS = "filter-chips"  # the active filters above the table, each removable (callbacks/filters.py)
FILTER_CHIP = "filter-chip"  # pattern-matching id type of a chip: {'type': FILTER_CHIP, 'index': 'col:<name>'}
COLUMNS_SHOWN = "columns-shown"  # the column chooser: the columns shown ...
COLUMNS_PINNED = "columns-pinned"  # ... and those pinned to the left
TABLE_IDX_FILTER = "table-idx-filter"  # {run, epoch, idx}: the idx a Failures finding narrows that epoch to, or None
SELECTED_ROW = "selected-row"  # the open datapoint's row when it was opened (prev/next, where it is not loaded)
PREV_BUTTON = "prev-datapoint"
NEXT_BUTTON = "next-datapoint"
NAVIGATION_NOTE = "navigation-note"  # says why prev/next did nothing (the table's first or last row)
SAVED_VIEWS = "saved-views"  # the run's named views (callbacks/address.py); choosing one opens it
VIEW_NAME = "view-name"  # the name to save the view under
SAVE_VIEW = "save-view"
SAVE_VIEW_ASKED = "save-view-asked"  # {name, address}: what the browser asks the server to save
VIEW_NOTE = "view-note"  # 'saved as ...', or why not
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
TAB_TRAINING = "tab-training"
TAB_GALLERY = "tab-gallery"
TAB_VALUES = (TAB_DATAPOINT, TAB_GALLERY, TAB_COMPARE_EPOCHS, TAB_COMPARE_RUNS, TAB_MODEL_REPORT, TAB_FAILURES,
              TAB_TRAINING)

DATAPOINT_PANEL = "datapoint-panel"
# Each panel's status line says "loading datapoint N …" while the panel shows another datapoint than the one asked
# for (callbacks/pending.py); its DRAWN store holds what the panel shows (written with the panel).
DATAPOINT_STATUS = "datapoint-status"
DATAPOINT_DRAWN = "datapoint-drawn"
DEBUGGER_PICK = "debugger-pick"  # the debuggers whose outputs the Datapoint tab draws
COMPARE_EPOCHS_SELECT = "compare-epochs-select"
COMPARE_EPOCHS_PANEL = "compare-epochs-panel"
COMPARE_RUN_SELECT = "compare-run-select"
COMPARE_RUN_EPOCH_SELECT = "compare-run-epoch-select"
COMPARE_RUNS_PANEL = "compare-runs-panel"
COMPARE_EPOCHS_SHOWN = "compare-epochs-shown"  # the open idx, written only while Compare epochs is the tab shown
COMPARE_RUNS_SHOWN = "compare-runs-shown"  # the same for Compare runs
COMPARE_EPOCHS_STATUS = "compare-epochs-status"
COMPARE_EPOCHS_DRAWN = "compare-epochs-drawn"
COMPARE_RUNS_STATUS = "compare-runs-status"
COMPARE_RUNS_DRAWN = "compare-runs-drawn"
RUN_DIFF_SHOWN = "run-diff-shown"  # the two sides and the metric, written only while Compare runs is the tab shown
RUN_DIFF_QUERY = "run-diff-query"  # what the run-against-run table's rows are of (None: nothing to compare)
MODEL_REPORT_PANEL = "model-report-panel"
