"""Debug indexes and locations damaged the way a crafted run folder could damage them, and a pickle that runs code
(shared by the page, viewer, export and analysis tests)."""

from __future__ import annotations

import json
import os


class TouchMarker:
    """Unpickling this runs ``touch <marker>``: what a malicious page would do."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


INDEX_DAMAGES = ("no_complete", "page_as_int", "datapoints_a_string")
LOCATION_DAMAGES = ("locations_truncated", "locations_a_fifo", "datapoints_beyond_int64", "world_size_beyond_any_name")


def damage_index(index_path: str, damage: str) -> None:
    """Rewrite ``index_path`` with one damage of ``INDEX_DAMAGES``."""
    with open(index_path) as f:
        index = json.load(f)
    if damage == "no_complete":
        del index["complete"]
    elif damage == "page_as_int":
        index["pages"] = ["page_0.pkl"]
    else:
        index["datapoints"] = "everything"
    with open(index_path, "w") as f:
        json.dump(index, f)


def damage_debug_files(debugger_dir: str, damage: str) -> None:
    """One damage of ``LOCATION_DAMAGES`` to a rank's locations file or index numbers."""
    locations, index_path = os.path.join(debugger_dir, "locations.bin"), os.path.join(debugger_dir, "index.json")
    if damage == "locations_truncated":
        os.truncate(locations, 100)
    elif damage == "locations_a_fifo":
        os.remove(locations)
        os.mkfifo(locations)
    else:
        with open(index_path) as f:
            index = json.load(f)
        index.update({"datapoints": 10**30} if damage == "datapoints_beyond_int64" else
                     {"world_size": 10**300, "rank": 10**299})
        with open(index_path, "w") as f:
            json.dump(index, f)
