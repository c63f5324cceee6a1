"""What the failure analysis needs of an epoch table, checked before any statistic: a table it cannot read gives one
message saying what is wrong and what to do (``AnalysisError``), never a traceback.

Lantern's runners always write tables that pass; a table written by another tool, edited by hand or damaged may
not: float labels with missing values, a column of structs or lists, roles naming columns the table lacks or roles
Lantern does not know.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from analysis.epoch_table import FAILURE_DEFINITION_ROLE, ROLE_LISTS, ROLE_MAPS, EpochTable
from utils.errors import LanternUserError

LIST_COLUMNS = ("probabilities",)
SHOWN = 5  # offending idx named in a message
# Without probabilities the class count is unknown; a label beyond this is no class of a classifier but a damaged or
# crafted value (the analysis counts per class).
MAX_CLASSES = 1_000_000


class AnalysisError(LanternUserError):
    """The run, epoch, table or failure definition cannot be analysed as asked."""


def check_table(table: EpochTable) -> None:
    """``AnalysisError`` for the first thing about ``table``'s columns and roles the analysis cannot use."""
    types = table.arrow_types()
    where = f"the epoch table {table.path}"
    if table.unknown_roles:
        raise AnalysisError(f"{where} declares roles Lantern does not know ({', '.join(table.unknown_roles)}); "
                            f"known: {', '.join((*ROLE_LISTS, *ROLE_MAPS, FAILURE_DEFINITION_ROLE))}: rewrite it "
                            "with Lantern (validate the epoch again) or remove those roles")
    for role in (*ROLE_LISTS, "higher_is_better"):
        absent = [name for name in table.roles.get(role, []) if name not in types]
        if absent:
            raise AnalysisError(f"{where} lists {', '.join(map(repr, absent[:SHOWN]))} as {role} but has no such "
                                "column: it was edited or damaged; validate the epoch again to rewrite it")
    for name, kind in types.items():
        if name in LIST_COLUMNS:
            if not _is_list_of_numbers(kind):
                raise AnalysisError(f"{where}: column {name!r} is {kind}, not a list of numbers per datapoint; "
                                    "validate the epoch again to rewrite it")
        elif not _is_scalar(kind):
            raise AnalysisError(f"{where}: column {name!r} holds {_kind_name(kind)} ({kind}); the analysis reads one "
                                "number, flag or string per datapoint: flatten it into scalar columns (e.g. one per "
                                "field) or leave it out of the table")
    for name in table.roles.get("scores", []):
        if not _is_number(types[name]):
            raise AnalysisError(f"{where}: score column {name!r} is {types[name]}, not numbers")
    if "idx" not in types or not pa.types.is_integer(types["idx"]):
        raise AnalysisError(f"{where} has no integer 'idx' column (the dataset index of each row); it was not "
                            "written by Lantern: validate the epoch again")
    _check_rows(table, where)
    _check_classes(table, types, where)


def _check_rows(table: EpochTable, where: str) -> None:
    """At least one row, and one row per datapoint: every statistic compares datapoints by their idx."""
    if table.count() == 0:
        raise AnalysisError(f"{where} has no rows: the epoch validated no datapoints; check the validation set's "
                            "length, then validate the epoch again")
    idx = np.sort(table.arrays(["idx"])["idx"])
    repeated = np.unique(idx[1:][idx[1:] == idx[:-1]])
    if len(repeated):
        shown = ", ".join(str(i) for i in repeated[:SHOWN])
        raise AnalysisError(f"{where}: column 'idx' repeats {len(repeated)} dataset indices (idx {shown}): each row "
                            "must be one datapoint; the table was edited or damaged: validate the epoch again")


def _check_classes(table: EpochTable, types: dict[str, pa.DataType], where: str) -> None:
    """``label`` (and ``prediction``) must be class numbers; a prediction may be missing (no finite logits)."""
    for name in ("label", "prediction"):
        if name in types and not _is_number(types[name]):
            raise AnalysisError(f"{where}: column {name!r} is {types[name]}, not class numbers")
    if "label" not in types:
        return
    values = table.arrays(["idx", "label"])
    labels = values["label"].astype(np.float64)
    bad = ~np.isfinite(labels) | (labels != np.round(labels))
    if bad.any():
        shown = ", ".join(str(i) for i in values["idx"][bad][:SHOWN])
        raise AnalysisError(f"{where}: column 'label' has {int(bad.sum())} values that are no class number (missing "
                            f"or fractional; idx {shown}): give every datapoint a class number, or leave those "
                            "datapoints out of the validation set")
    classes = table.class_count() or MAX_CLASSES
    outside = (labels < 0) | (labels >= classes)
    if outside.any():
        shown = ", ".join(f"idx {i}: {int(v)}" for i, v in zip(values["idx"][outside][:SHOWN], labels[outside]))
        raise AnalysisError(f"{where}: column 'label' has {int(outside.sum())} labels outside the class range 0.."
                            f"{classes - 1} ({shown}): give every datapoint a class number the model predicts, or "
                            "leave those datapoints out of the validation set")


def _is_scalar(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return _is_number(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)


def _is_number(kind: pa.DataType) -> bool:
    return pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)


def _is_list_of_numbers(kind: pa.DataType) -> bool:
    listed = pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
    return listed and (pa.types.is_floating(kind.value_type) or pa.types.is_integer(kind.value_type))


def _kind_name(kind: pa.DataType) -> str:
    if pa.types.is_struct(kind):
        return "structs"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return "lists"
    if pa.types.is_map(kind):
        return "maps"
    return "values of an unsupported type"
