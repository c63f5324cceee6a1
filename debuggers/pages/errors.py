"""Errors of writing and reading debug pages; a viewer shows any ``DebugDataError`` in place of the data."""

from __future__ import annotations

from utils.errors import LanternUserError


class DebugDataError(LanternUserError, ValueError):
    """Debug outputs on disk cannot be read; the message names the file and what to do."""


class CorruptPageError(DebugDataError):
    """A page, index or locations file is truncated, malformed, or not a regular file."""


class UnsafePageError(DebugDataError):
    """A (previous-format) page holds something Lantern never writes; nothing from it was executed."""


class PagesToConvertError(DebugDataError):
    """The folder holds pages of another format, which ``python -m debuggers.pages.convert`` rewrites once."""


class LegacyPagesError(PagesToConvertError):
    """The folder holds pages of Lantern's previous format, which must be converted once."""


class PicklePagesError(PagesToConvertError):
    """The folder holds Pylon's joblib pickles, which Lantern opens only to convert them, when told to trust them."""


class PageWriteError(RuntimeError):
    """A page or index could not be written; ``path`` and ``errno`` say where and why."""

    def __init__(self, message: str, path: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.errno = errno
