"""A run's tags (``tags.json``): names people give datapoints in the viewer, kept in the run folder by idx.

The file holds ``{"format": "lantern-tags", "version": 1, "tags": {name: [idx, ...]}}``, each list sorted with no
idx twice. Tags are the run's, not an epoch's: a datapoint tagged ``blurry`` is blurry at every epoch.

Several viewers, in several processes, may tag one run at once. A change (``change_tags``) reads the file, changes
it and writes it whole (a temporary file, then renamed: a reader sees the old file or the new one, never part of
one) while it holds an exclusive lock on ``.tags.lock`` beside it, so no viewer's change is lost; it waits for the
lock at most ``LOCK_WAIT_S`` (never a hang), and reads back what it wrote before it lets the lock go. The file is
read as guardedly as every run file (a regular file, never a link, at most ``MAX_BYTES``, JSON of the shape above).
One that is not is a ``TagsFileError`` naming it and what to do, and it is never overwritten; it concerns its own
run only, since every run keeps its tags in its own folder.
"""

from __future__ import annotations

import errno
import os
import stat
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Optional

from run_dir.errors import RunFileError
from run_dir.folder import RunDir
from run_dir.run_files import MIB, flock_within, read_run_json
from utils.atomic_files import atomic_write_json

FORMAT = "lantern-tags"
MAX_BYTES = 64 * MIB  # a tag on each of a million datapoints takes ~8 MB
MAX_TAGS = 64  # per run
MAX_NAME = 40  # characters of a tag's name
MAX_IDX = 2**63 - 1  # a dataset index is an int64 in every table
LOCK_WAIT_S = 10.0
SEPARATOR = ","  # never in a name: a table cell lists a datapoint's tags with it, and a filter "a, b" means a or b
Tags = dict[str, list[int]]


class TagsFileError(RunFileError):
    """A run's tags cannot be read or changed; the message names the file and says what to do."""


def clean_tag(name: object) -> str:
    """A tag's name as typed, trimmed; ``TagsFileError`` says what a name may be."""
    if not isinstance(name, str) or not name.strip():
        raise TagsFileError("type a tag's name first")
    name = name.strip()
    if len(name) > MAX_NAME or SEPARATOR in name or any(unicodedata.category(c).startswith("C") for c in name):
        raise TagsFileError(f"a tag's name is at most {MAX_NAME} printable characters, without a comma "
                            f"(got {name[:MAX_NAME + 5]!r})")
    return name


def tags_version(run_path: str) -> Optional[tuple[int, int, int]]:
    """Changes whenever the run's tags file is written; None without one."""
    try:
        status = os.lstat(RunDir(run_path).tags)
    except OSError:
        return None
    return status.st_ino, status.st_size, status.st_mtime_ns


def read_tags(run_path: str) -> Tags:
    """The run's tags ({} without a file); ``TagsFileError`` when the file is not one Lantern wrote."""
    path = RunDir(run_path).tags
    try:
        data = read_run_json(path, "tags file", MAX_BYTES)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise TagsFileError(f"{_unusable(path)}: {exc}") from None
    tags = data.get("tags") if isinstance(data, dict) and data.get("format") == FORMAT else None
    if not _well_formed(tags):
        raise TagsFileError(f"{_unusable(path)}: it is not a Lantern tags file (expected {{'format': '{FORMAT}', "
                            "'tags': {name: [idx, ...]}} with each list sorted)")
    return tags


def change_tags(run_path: str, name: object, idx: Iterable[int], add: bool = True,
                wait_s: float = LOCK_WAIT_S) -> Tags:
    """Give the datapoints ``idx`` the tag ``name`` (or, ``add`` False, take it from them) and return the run's
    tags as stored; another viewer's change is waited for at most ``wait_s``. A tag no datapoint carries any more
    is gone."""
    name = clean_tag(name)
    chosen = {_checked_idx(i) for i in idx}
    with _locked(run_path, wait_s):
        tags = read_tags(run_path)
        carried = set(tags.get(name, []))
        changed = carried | chosen if add else carried - chosen
        if changed == carried:
            return tags
        if name not in tags and len(tags) >= MAX_TAGS:
            raise TagsFileError(f"{run_path} has {MAX_TAGS} tags already: take one off every datapoint first")
        tags = {**tags, name: sorted(changed)} if changed else {k: v for k, v in tags.items() if k != name}
        try:
            atomic_write_json(RunDir(run_path).tags, {"format": FORMAT, "version": 1, "tags": tags}, indent=None)
        except OSError as exc:
            raise TagsFileError(f"the tags of {run_path} cannot be written ({exc.strerror or exc}); tags are kept in "
                                "the run folder: make it writable, or copy the run somewhere writable") from None
        stored = read_tags(run_path)
    if stored != tags:
        raise TagsFileError(f"{RunDir(run_path).tags} changed while this viewer held its lock: a program that does "
                            "not take the lock writes it; stop it and tag again")
    return stored


@contextmanager
def _locked(run_path: str, wait_s: float) -> Iterator[None]:
    """Hold the run's tags lock (``flock`` on ``.tags.lock``, let go when the file is closed, also by a killed
    process); ``TagsFileError`` when it cannot be opened or another holder keeps it past ``wait_s``."""
    path = RunDir(run_path).tags_lock
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise TagsFileError(f"{path} is a symbolic link; Lantern never writes one: remove it, then tag "
                                "again") from None
        raise TagsFileError(f"the tags of {run_path} cannot be changed: {path} cannot be opened "
                            f"({exc.strerror or exc}); tags are kept in the run folder: make it writable") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TagsFileError(f"{path} is not a regular file (a FIFO, device or folder); remove it, then tag "
                                "again")
        if not flock_within(fd, wait_s):
            raise TagsFileError(f"another viewer has held the tags of {run_path} for over {wait_s:g} s; tag again "
                                "in a moment")
        yield
    finally:
        os.close(fd)


def _unusable(path: str) -> str:
    return (f"the tags file {path} cannot be used, so this run's tags are not shown and cannot be changed (other "
            "runs keep theirs); move it away to start this run's tags afresh")


def _checked_idx(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_IDX:
        raise TagsFileError(f"{value!r} is not a dataset index (a whole number 0..{MAX_IDX})")
    return value


def _well_formed(tags: Any) -> bool:
    if not isinstance(tags, dict) or len(tags) > MAX_TAGS:
        return False
    for name, idx in tags.items():
        try:
            named = clean_tag(name) == name
        except TagsFileError:
            return False
        if not named or not isinstance(idx, list) or not idx or not all(
                type(i) is int and 0 <= i <= MAX_IDX for i in idx) or any(a >= b for a, b in zip(idx, idx[1:])):
            return False
    return True
