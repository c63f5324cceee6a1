"""An epoch's stored findings (``findings.json``): written whole, read back only while the epoch's inputs are
as they were when the analysis began.

The file holds ``{"format", "inputs", "findings"}``: ``inputs`` is the ``epoch_signature`` (the epoch table's and
the debug files' sizes and times, and the run's tags file's) taken before the analysis read them, so findings of an
epoch whose table, debug outputs or tags changed since are never shown as its own. What ``findings`` holds is the
analysis' (``analysis.findings``).
"""

from __future__ import annotations

import os
from typing import Any, Optional

from run_dir.errors import FindingsFileError
from run_dir.folder import run_of
from run_dir.names import DEBUGGER_DIR, EPOCH_TABLE_FILE, FINDINGS_FILE
from run_dir.run_files import read_run_json
from run_dir.tags_file import tags_version
from utils.atomic_files import atomic_write_json

FORMAT = 2  # bumped when a field changes meaning: older files are then recomputed, not misread
MAX_FINDINGS_BYTES = 256 * 2**20  # far above what an epoch of a million datapoints gives


def write_findings_file(epoch_dir: str, findings: dict[str, Any], signature: list) -> None:
    """``findings`` (JSON-able) as ``epoch_dir/findings.json``, atomically, with the signature its inputs had."""
    atomic_write_json(os.path.join(epoch_dir, FINDINGS_FILE),
                      {"format": FORMAT, "inputs": signature, "findings": findings}, indent=None)


def read_findings_file(epoch_dir: str) -> Optional[Any]:
    """The stored findings' JSON when the epoch's inputs are as they were then, else None (none stored, stale, or
    of another format). ``RunFileError`` when the file is not one Lantern wrote."""
    path = os.path.join(epoch_dir, FINDINGS_FILE)
    try:
        stored = read_run_json(path, "findings file", MAX_FINDINGS_BYTES)
    except FileNotFoundError:
        return None
    if not isinstance(stored, dict) or stored.get("format") != FORMAT or \
            stored.get("inputs") != epoch_signature(epoch_dir):
        return None
    if "findings" not in stored:
        raise FindingsFileError(f"findings file {path} holds no findings; remove it (the next analysis rewrites it)")
    return stored["findings"]


def epoch_signature(epoch_dir: str) -> list:
    """What the findings of ``epoch_dir`` are computed from, as it is now: its outputs (``outputs_signature``) and,
    where the run has tags (meta columns of the analysis), its tags file's version."""
    tags = tags_version(run_of(epoch_dir))
    return outputs_signature(epoch_dir) + ([list(tags)] if tags else [])


def outputs_signature(epoch_dir: str) -> list:
    """The epoch's outputs as they are now: the epoch table's size and modification time, and those of each file of
    its debug outputs (names, not contents: a rewrite changes them)."""
    table = os.stat(os.path.join(epoch_dir, EPOCH_TABLE_FILE))
    debugger = os.path.join(epoch_dir, DEBUGGER_DIR)
    files = []
    if os.path.isdir(debugger) and not os.path.islink(debugger):
        for name in sorted(os.listdir(debugger)):
            status = os.lstat(os.path.join(debugger, name))
            files.append([name, status.st_size, status.st_mtime_ns])
    return [table.st_size, table.st_mtime_ns, files]
