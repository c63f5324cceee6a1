"""Debug indexes damaged the way a crafted run folder could damage them (shared by the viewer and export tests)."""

from __future__ import annotations

import json

INDEX_DAMAGES = ("no_complete", "page_as_int", "datapoints_a_string")


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
