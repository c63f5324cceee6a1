"""The files of the viewer's named views: one file per run, ``{'run': run's absolute path, 'views': {name: address}}``.

They live in a folder of the viewer's own, ``~/.config/lantern/viewer_views/`` (``$XDG_CONFIG_HOME`` when set),
never in a run folder: a run folder is data, often shared or read-only, and a viewer that writes there could be
made to write elsewhere by a crafted folder. One file per run (named by a hash of the run's path, never by the path
itself) means a file that cannot be read costs that run's views only.

A file is read as guardedly as a run's files (a regular file, at most ``MAX_BYTES``, JSON of the expected shape;
anything else is a ``RunFileError`` naming it), and changed under an ``fcntl.flock`` on the folder's lock file
(viewers in several processes may save at once; a lock not had in ``LOCK_TIMEOUT_S`` is an error, never a hang),
read, changed and written whole (a temporary file, then renamed). What an address may hold is the viewer's
(``runners.eval_viewer``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator

from run_dir.errors import RunFileError
from run_dir.run_files import MIB, flock_within, read_run_json
from utils.atomic_files import atomic_write, write_new_file
from utils.errors import LanternUserError

MAX_BYTES = 4 * MIB  # of one run's file; the writer refuses a change that would make it larger
MAX_VIEWS = 200  # per run
FORMAT = "lantern-viewer-views"
LOCK_FILE = ".lock"
LOCK_TIMEOUT_S = 10.0
Views = dict[str, str]


class ViewsNotSaved(LanternUserError):
    """A change the views file cannot take now (the lock not had in time, the file would be too large); the file
    itself is fine."""


def default_views_dir() -> str:
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(config, "lantern", "viewer_views")


def views_file(folder: str, run_path: str) -> str:
    """The file of ``run_path``'s views: a name made of hex digits, whatever the run's path holds."""
    return os.path.join(folder, hashlib.sha256(run_path.encode("utf-8", "surrogatepass")).hexdigest()[:32] + ".json")


def read_views(folder: str, run_path: str) -> Views:
    """``run_path``'s views ({} when it has none); ``RunFileError`` (or ``OSError``) when its file is not one the
    viewer wrote."""
    path = views_file(folder, run_path)
    if not os.path.lexists(path):
        return {}
    data = read_run_json(path, "saved views file", MAX_BYTES)
    views = data.get("views") if isinstance(data, dict) and data.get("format") == FORMAT \
        and data.get("run") == run_path else None
    if not isinstance(views, dict) or len(views) > MAX_VIEWS or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in views.items()):
        raise RunFileError(f"{path} is not the saved views file of {run_path} (expected {{'format': '{FORMAT}', "
                           "'run': its path, 'views': {name: address}}); move it away to start this run's views "
                           "afresh (other runs' views are in files of their own)")
    return views


def change_views(folder: str, run_path: str, change: Callable[[Views], None]) -> None:
    """Read ``run_path``'s views, ``change`` them in place and write them back, all under the folder's lock;
    ``ViewsNotSaved`` when the lock is not had in time or the file would exceed ``MAX_BYTES``."""
    os.makedirs(folder, exist_ok=True)
    with _locked(os.path.join(folder, LOCK_FILE)):
        views = read_views(folder, run_path)
        change(views)
        data = json.dumps({"format": FORMAT, "version": 2, "run": run_path, "views": views}, indent=1).encode()
        if len(data) > MAX_BYTES or len(views) > MAX_VIEWS:
            raise ViewsNotSaved(f"the saved views of {run_path} would take {len(data)} bytes in {len(views)} views, "
                               f"more than a views file holds ({MAX_BYTES} bytes, {MAX_VIEWS} views); delete some "
                               f"from {views_file(folder, run_path)}")
        atomic_write(views_file(folder, run_path), lambda temp: write_new_file(temp, data))


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``, tried until ``LOCK_TIMEOUT_S`` (the holder is another viewer saving)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        if not flock_within(fd, LOCK_TIMEOUT_S):
            raise ViewsNotSaved(f"another viewer has held {path} for {LOCK_TIMEOUT_S:g} s; save again, or stop the "
                                "viewer that hangs on it")
        yield
    finally:
        os.close(fd)
