"""A class number as the user reads it: the name the table gives it, else the number."""

from __future__ import annotations

from typing import Any

import numpy as np


def class_name(values: dict[str, np.ndarray], class_id: Any, hint: str = "label") -> Any:
    """The class's name where the table names classes (``label_name``, ``prediction_name``), else its number."""
    for ids, names in ((hint, f"{hint}_name"), ("label", "label_name"), ("prediction", "prediction_name")):
        if names in values:
            match = np.flatnonzero(values[ids] == class_id)
            if len(match):
                return values[names][match[0]]
    return int(class_id)
