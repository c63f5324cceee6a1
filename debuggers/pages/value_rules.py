"""What a page value may be: its leaf types, how deeply nested and how many nodes one output holds, and the error
that refuses anything else. Shared by the conversion of outputs (``debuggers.pages.values``, which needs torch) and
the readers of pages, which must not import torch: a viewer or an export reads pages without it."""

from __future__ import annotations

MAX_DEPTH = 64  # deeper outputs are almost certainly reference cycles
MAX_OUTPUT_NODES = 2**16  # JSON values and containers one output's part of a record header may list
LEAF_TYPES = (str, bytes, int, float, bool, complex, type(None))


class UnsupportedOutputError(TypeError):
    """A debugger returned something a page cannot hold."""


def join_path(path: str, key: str | int) -> str:
    """``'stats.hist'`` / ``'stats[2]'``: where a value sits inside an output, for error messages."""
    if isinstance(key, str):
        return f"{path}.{key}" if path else key
    return f"{path}[{key}]"
