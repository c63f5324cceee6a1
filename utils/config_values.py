"""Checks of config values shared by the places that validate them (each raises its own ConfigError)."""

from __future__ import annotations

import math
from typing import Any


def is_positive_number(value: Any) -> bool:
    """A finite int or float above zero (``True`` is not a number here, though Python says it is 1)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
