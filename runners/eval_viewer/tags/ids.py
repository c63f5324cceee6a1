"""Ids of the tag bar, and what the browser sends them."""

from runners.eval_viewer.shared.sends import Sends, record, text, whole

TAG_BAR = "tag-bar"
TAG_CHIPS = "tag-chips"  # the run's tags, each a button toggling it on the open datapoint (keys 1-9)
TAG_CHIP = "tag-chip"  # pattern-matching id type of a chip: {'type': TAG_CHIP, 'index': <its place, 0..>}
TAG_NAME = "tag-name"  # the tag to give (key t; Enter gives it to the open datapoint)
TAG_NAMES = "tag-names"  # the run's tags offered while typing (a datalist)
TAG_OPEN = "tag-open"  # button: give the tag to the open datapoint
TAG_ROWS = "tag-rows"  # button: give it to every datapoint the table's filters show
UNTAG_ROWS = "untag-rows"  # button: take it from them
TAG_NOTE = "tag-note"  # what was tagged, or why not
TAGS_CHANGED = "tags-changed"  # {run, version}: the run's tags as last written here (the table's rows follow)

SENDS: Sends = {(TAG_NAME, "value"): text, (TAG_NAME, "n_submit"): whole,
                (TAGS_CHANGED, "data"): record(run=text, version=text)}
