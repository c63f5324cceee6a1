"""What people type in a table's filter box, compiled to ``(column, op, value)`` triples.

The boxes take what W&B Tables and spreadsheets taught: ``> 2``, ``<= 0.5``, ``0.2..0.6``, ``!= ring``,
``ring, circle``, ``423`` (equals), ``blank`` / ``not blank`` (no value). Labels (``label``, ``prediction``) take
class names or ids (a name matches the classes whose name contains it, ``ring, circle`` the classes named so),
booleans ``true`` / ``false``. Nothing typed ever becomes query text: the column comes from the table's own columns
(``EpochTable`` refuses any other), the values are parsed here into numbers, booleans, strings or class ids and
bound as parameters. Something that cannot be read gives ``BadRequest`` with what to type instead.
"""

from __future__ import annotations

import math
import re
from typing import Any, Optional

from runners.eval_viewer.shared.browser_input import BadRequest, typed_idx

LABEL_COLUMNS = ("label", "prediction")
MAX_TEXT = 400  # characters in one box
MAX_LIST = 100  # values in one "a, b, c"
EXAMPLES = "> 2, <= 0.5, 0.2..0.6, != ring, ring, circle, blank"
_COMPARISON = re.compile(r"(>=|<=|!=|<>|≠|≥|≤|>|<|=)\s*(.*)", re.S)
_RANGE = re.compile(r"(.+?)\s*\.\.\s*(.+)", re.S)
_OPS = {">=": ">=", "<=": "<=", "!=": "!=", "<>": "!=", "≠": "!=", "≥": ">=", "≤": "<=", ">": ">", "<": "<",
        "=": "="}
_NULL_WORDS = {"blank": "is null", "empty": "is null", "not blank": "is not null", "not empty": "is not null"}


def compile_filter(column: str, kind: str, text: Any, class_names: dict[int, str]) -> list[tuple]:
    """The triples for ``text`` typed under ``column`` (``kind``: the table's type of it: 'integer', 'float',
    'boolean', 'string')."""
    if not isinstance(text, str):
        raise BadRequest(f"the filter of {column} is not text; clear it and type e.g. {EXAMPLES}")
    text = text.strip()
    if len(text) > MAX_TEXT:
        raise BadRequest(f"the filter of {column} is {len(text)} characters long (at most {MAX_TEXT})")
    if not text:
        return []
    if text.lower() in _NULL_WORDS:
        return [(column, _NULL_WORDS[text.lower()])]
    value = _value_reader(column, kind, class_names)
    comparison, span = _COMPARISON.fullmatch(text), _RANGE.fullmatch(text)
    if comparison:
        op, operand = _OPS[comparison.group(1)], comparison.group(2).strip()
        if op in ("=", "!="):
            return [_equality(column, op, operand, value)]
        return [(column, op, _number(column, operand))]
    if span and kind in ("integer", "float") and column not in LABEL_COLUMNS:
        return [(column, ">=", _number(column, span.group(1))), (column, "<=", _number(column, span.group(2)))]
    return [_equality(column, "=", text, value)]


def _equality(column: str, op: str, text: str, value) -> tuple:
    """``=`` / ``!=`` one value, or ``in`` / ``not in`` a list (``a, b``; a label name may match several classes)."""
    parts = [part.strip() for part in text.split(",")] if "," in text else [text]
    if len(parts) > MAX_LIST or not all(parts):
        raise BadRequest(f"the filter of {column} lists {len(parts)} values, some empty (at most {MAX_LIST}); type "
                         f"e.g. {EXAMPLES}")
    values = [found for part in parts for found in value(part)]
    if len(parts) == 1 and len(values) == 1 and column not in LABEL_COLUMNS:
        return column, op, values[0]
    return column, "in" if op == "=" else "not in", values


def _value_reader(column: str, kind: str, class_names: dict[int, str]):
    """How one typed value is read for ``column``: a list of the values it stands for."""
    if column in LABEL_COLUMNS:
        return lambda text: _classes(text, class_names)
    if kind == "boolean":
        return lambda text: [_boolean(column, text)]
    if kind in ("integer", "float"):
        return lambda text: [_number(column, text)]
    return lambda text: [text]


def _classes(text: str, class_names: dict[int, str]) -> list[int]:
    """The class ids ``text`` names: its number, else the classes named exactly so, else those whose name holds it
    (case-insensitive); none when nothing matches (the filter then matches no datapoint)."""
    number = typed_idx(text)
    if number is not None:
        return [number]
    text = text.lower()
    exact = [i for i, name in class_names.items() if name.lower() == text]
    return exact or [i for i, name in class_names.items() if text in name.lower()]


def _number(column: str, text: str) -> float:
    try:
        number = float(text)
    except ValueError:
        raise BadRequest(f"the filter of {column}: {text[:40]!r} is not a number; type e.g. {EXAMPLES}") from None
    if not math.isfinite(number):
        raise BadRequest(f"the filter of {column}: {text[:40]!r} is not a finite number; type 'blank' for no value")
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


def _boolean(column: str, text: str) -> bool:
    found: Optional[bool] = {"true": True, "false": False, "1": True, "0": False}.get(text.lower())
    if found is None:
        raise BadRequest(f"the filter of {column}: {text[:40]!r} is not true or false")
    return found
