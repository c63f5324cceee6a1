"""An open datapoint sets off few callbacks: every browser-side follow-up runs in one (``shared/opened.py``)."""

from __future__ import annotations

from runners.eval_viewer.app import create_app
from runners.eval_viewer.datapoint.ids import DATAPOINT_PANEL
from runners.eval_viewer.shared.ids import SELECTED
from runners.eval_viewer.tags.ids import TAG_CHIPS


def test_an_open_datapoint_sets_off_the_follow_ups_the_panel_and_the_tags_only(tmp_path):
    app = create_app([str(tmp_path)])
    found = [key for key, callback in app.callback_map.items()  # a callback's key names its outputs
             if any(dependency["id"] == SELECTED for dependency in callback["inputs"])]
    drawing = [key for key in found if f"{DATAPOINT_PANEL}.children" in key or f"{TAG_CHIPS}.children" in key]
    assert len(drawing) == 2, found
    assert len(found) == 3, f"callbacks set off by an open datapoint besides the panel's and the tags': {found}"
