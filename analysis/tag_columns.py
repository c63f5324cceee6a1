"""A run's tags (``run_dir.tags_file``: names people give datapoints in the viewer) as meta columns of its epoch
tables: ``tag:<name>``, True where the datapoint carries the tag. The failure analysis reads them as it reads any
meta-info field, so a tag that fails far more than the rest is a slice like any other."""

from __future__ import annotations

from typing import Optional

import numpy as np

from run_dir.folder import run_of
from run_dir.tags_file import TagsFileError, read_tags

PREFIX = "tag:"


def tag_columns(epoch_dir: str, idx: np.ndarray) -> tuple[dict[str, np.ndarray], Optional[str]]:
    """A bool column per tag of the run holding ``epoch_dir``, a row per ``idx``; and why there are none when its
    tags file cannot be read (the analysis goes on without them)."""
    try:
        tags = read_tags(run_of(epoch_dir))
    except TagsFileError as exc:
        return {}, f"tags left out: {exc}"
    return {PREFIX + name: np.isin(idx, np.asarray(tagged, dtype=np.int64)) for name, tagged in tags.items()}, None
