"""Ids of the Failures tab and its verification (the browser sends them clicks only: ``n_clicks``, a chart's
``clickData``, the poll's ``n_intervals``)."""

from runners.eval_viewer.shared.sends import Sends

TAB_FAILURES = "tab-failures"
FAILURES_PANEL = "failures-panel"  # the summary and the meta family's slices
FAILURES_MORE = "failures-more"  # what the model does, subgroups, label suspects, data map, restatements, NaN, ...
FAILURES_FINDING = "failures-finding"  # pattern-matching id type: {'type': FAILURES_FINDING, 'index': '<list>-<n>'}
FAILURES_SEPARATORS_CHART = "failures-separators"  # the meta family's separating quantities
FAILURES_DATA_MAP_CHART = "failures-data-map"
FAILURES_CONFUSION_CHART = "failures-confusion"
FAILURES_SHOW_ALL = "failures-show-all"
FAILURES_FILTER_NOTE = "failures-filter-note"
VERIFY = "failures-verify"  # pattern-matching id type: {'type': VERIFY, 'index': '<list>-<position>'}, keys of
# analysis.finding_plans.finding_entries ('meta.slices-0', 'subgroups-1')
VERIFY_STATUS = "failures-verify-status"
VERIFY_POLL = "failures-verify-poll"
VERIFY_CANCEL = "failures-verify-cancel"

SENDS: Sends = {}
