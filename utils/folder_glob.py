"""``glob_in``: files matching a pattern inside one folder, whatever the folder is called."""

from __future__ import annotations

import glob
import os


def glob_in(folder: str, pattern: str) -> list[str]:
    """The paths in ``folder`` matching ``pattern`` (which may name subfolders, ``epoch_*/debugger``), sorted.

    The folder's own name is taken literally: a run folder named ``*`` or ``run[1]`` matches itself, never
    its neighbours (plain ``glob.glob(os.path.join(folder, pattern))`` would read other runs' files)."""
    return sorted(glob.glob(os.path.join(glob.escape(folder), pattern)))
