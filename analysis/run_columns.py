"""Columns of an epoch that its table does not hold but its run folder does: the run's tags (meta columns)
(``analysis/tag_columns.py``) and the columns derived from its captured inputs (``analysis/rare_tokens.py``). The
analysis and the held-out replication of ``--verify`` (``analysis/replication.py``) read them alike, so a slice
found on one can be found again on half of the datapoints."""

from __future__ import annotations

import numpy as np

from analysis.rare_tokens import rare_token_columns
from analysis.tag_columns import tag_columns


def run_columns(epoch_dir: str, idx: np.ndarray) -> tuple[dict[str, np.ndarray], list[str]]:
    """The columns, a row per ``idx``, and why some are left out (the analysis goes on without them)."""
    tagged, tags_note = tag_columns(epoch_dir, idx)
    derived, inputs_note = rare_token_columns(epoch_dir, idx)
    return {**tagged, **derived}, [note for note in (tags_note, inputs_note) if note]
