"""A run's tags as the viewer uses them: read through ``run_dir.tags_file`` (cached by the file's version, so several
viewers tagging one run see each other's tags), as the table's ``tags`` cells and as its filter on them.

The table's ``tags`` column is not in the epoch table: its filter (typed as any box, ``table/filter_text.py``:
``blurry``, ``blurry, dark`` for either, ``!= blurry``, ``blank`` for none) becomes a condition on ``idx``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from run_dir.tags_file import SEPARATOR, TagsFileError, read_tags, tags_version
from runners.eval_viewer.shared.browser_input import BadRequest
from runners.eval_viewer.shared.cache import BoundedCache

TAGS_COLUMN = "tags"
MAX_RUNS = 16
FORMS = "a tag's name, names separated by commas (any of them), != name, blank (no tag), not blank"


@dataclass(frozen=True)
class RunTags:
    """The tags of a run: each tag's idx (sorted), and the file's version."""

    tags: dict[str, np.ndarray]
    version: str

    def of(self, idx: int) -> list[str]:
        """The tags ``idx`` carries, in the run's order."""
        return [name for name, tagged in self.tags.items() if _holds(tagged, idx)]

    def cells(self, idx: list[int]) -> list[str]:
        """The ``tags`` cell of each of ``idx``: its tags, comma-separated."""
        found = np.asarray(idx, dtype=np.int64)
        held = {name: np.isin(found, tagged) for name, tagged in self.tags.items()}
        return [f"{SEPARATOR} ".join(name for name, mask in held.items() if mask[i]) for i in range(len(found))]

    def tagged(self, names: list[str]) -> list[int]:
        """The idx carrying any of ``names``, sorted."""
        chosen = [self.tags[name] for name in names if name in self.tags]
        return np.unique(np.concatenate(chosen)).tolist() if chosen else []


_CACHE: BoundedCache[RunTags] = BoundedCache(MAX_RUNS)


def run_tags(run_path: Optional[str]) -> RunTags:
    """The run's tags (none for no run); ``TagsFileError`` when its file cannot be used."""
    if not run_path:
        return RunTags({}, "")
    version = tags_version(run_path)
    return _CACHE.get((run_path, version), lambda: RunTags(
        {name: np.asarray(idx, dtype=np.int64) for name, idx in read_tags(run_path).items()}, repr(version)))


def tag_conditions(conditions: list[tuple], run_path: Optional[str]) -> list[tuple]:
    """The typed filter of the ``tags`` column (``(tags, op, value)`` as ``table/filter_text.py`` compiles any text
    column's) as conditions on ``idx``; ``BadRequest`` for a form a tag filter has not."""
    try:
        tags = run_tags(run_path)
    except TagsFileError as exc:
        raise BadRequest(str(exc)) from None
    found = []
    for _, op, *value in conditions:
        names = value[0] if value and isinstance(value[0], list) else value
        if op in ("=", "in", "is not null"):
            found.append(("idx", "in", tags.tagged(list(tags.tags) if op == "is not null" else names)))
        elif op in ("!=", "not in", "is null"):
            found.append(("idx", "not in", tags.tagged(list(tags.tags) if op == "is null" else names)))
        else:
            raise BadRequest(f"the filter of {TAGS_COLUMN} takes {FORMS}")
    return found


def _holds(tagged: np.ndarray, idx: int) -> bool:
    at = int(np.searchsorted(tagged, idx))
    return at < len(tagged) and int(tagged[at]) == idx
