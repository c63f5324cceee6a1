"""Errors of a run folder's files; each names the file that failed and what to do about it.

They are no page errors (``debuggers.pages.errors``): a run's files are not its debug pages, and a reader that
shows a page error in place of the data shows these in place of what the file holds.
"""

from __future__ import annotations

from utils.errors import LanternUserError


class RunFileError(LanternUserError, ValueError):
    """A file or folder of a run is a link, a special file, too large or not what Lantern writes there."""


class FindingsFileError(RunFileError):
    """A findings file that is not what Lantern writes (a wrong field, type or version)."""


class MonitorFileError(RunFileError):
    """The file is not a training monitor file (another magic), or a frame cannot be written."""


class EpochTableError(LanternUserError):
    """An epoch table cannot be read, or a query names a column or operator it does not have."""


class EpochTableFileError(RunFileError, EpochTableError):
    """The epoch table's file is missing, a link or a special file, damaged, or more than its bytes can hold."""


class EpochNotFoundError(LanternUserError):
    """A run has no epoch holding what was asked (or is no run at all); the message says which epochs have it."""
