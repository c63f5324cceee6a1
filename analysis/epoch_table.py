"""The epoch table: one row per datapoint of a validation epoch, as a Parquet file queried with DuckDB.

Columns (see ``analysis/epoch_rows.py`` for how a run collects them)::

    idx                      the dataset index (sorted, unique)
    label, prediction        class indices, with label_name / prediction_name where the dataset names classes
    probabilities            the model's per-class probabilities (a list column, for the label-error search)
    <score>                  every per-datapoint score of the metric (accuracy, cross_entropy, ...)
    <meta key>               every scalar meta-info field (meta.<key> when the name is taken)
    <debugger>.<key>         each debugger's ``summary()`` when the debugger ran that epoch

A NaN in a scalar column is stored as null (no number), so it sorts last and ``is null`` finds it.
The file is written atomically (a reader sees the previous complete file or the new one) and is read
page by page: nothing loads it whole. It is opened and checked before any query as ``run_dir.table_file``
says (a regular file, read by a name of its own, no more rows than its bytes can hold), and each table's DuckDB
connection has a memory limit and a few threads of its own.

Filters are structured ``(column, op, value)`` triples; column names are checked against the file's own
columns and values are bound as parameters, so no text from a browser ever becomes SQL.
"""

from __future__ import annotations

import json
import math
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Union

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from run_dir.errors import EpochTableError, EpochTableFileError
from run_dir.table_file import fd_path, open_table_file, read_checked_schema
from utils.atomic_files import atomic_write

ROLES_KEY = b"lantern.roles"
ROLE_LISTS = ("scores", "meta", "summaries", "outcome", "input_region")  # roles that list column names
ROLE_MAPS = {"higher_is_better": bool, "layers": str}  # roles that map a name to a bool (a score's direction) or a
# string (a debugger's layer)
FAILURE_DEFINITION_ROLE = "failure_definition"  # the run's config['failure_definition']: {'metric', 'worst_fraction'}
# A page's rows are spread over the whole file; fetching them decodes only the row groups and data pages
# that hold them, so both are kept small (measured in benchmarks/epoch_table.py, docs/benchmarks.md).
ROW_GROUP_SIZE = 16_384  # DuckDB's unit of skipping by min/max (and of parallel reading)
DATA_PAGE_BYTES = 8_192  # the unit a reader decompresses
OPERATORS = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
             "in": "IN", "not in": "NOT IN", "is null": "IS NULL", "is not null": "IS NOT NULL",
             "differs from": "IS DISTINCT FROM"}  # its value is another column: (label, 'differs from', prediction)
MEMORY_LIMIT = "2GB"  # per table's connection: what a sort or an aggregate may hold before DuckDB refuses
THREADS = min(4, os.cpu_count() or 1)  # a viewer queries many tables; a page of rows reads a few row groups
Filter = Sequence[tuple]  # [(column, op, value), ...], all of them must hold
ColumnValues = Union[np.ndarray, list, pa.Array]


def write_epoch_table(path: str, columns: dict[str, ColumnValues], roles: dict[str, Any] | None = None) -> None:
    """Write ``columns`` (equal lengths; 2-D arrays become list columns) to ``path`` atomically.

    ``roles`` (JSON) is kept in the file's metadata: which columns are scores, meta info, summaries.
    """
    table = pa.table({name: _arrow_column(values) for name, values in columns.items()})
    table = table.replace_schema_metadata({ROLES_KEY: json.dumps(roles or {})})
    strings = [name for name, column in zip(table.column_names, table.columns)
               if pa.types.is_string(column.type) or pa.types.is_dictionary(column.type)]
    atomic_write(path, lambda temp: pq.write_table(table, temp, row_group_size=ROW_GROUP_SIZE,
                                                   data_page_size=DATA_PAGE_BYTES, use_dictionary=strings,
                                                   compression="snappy"))


def _arrow_column(values: ColumnValues) -> pa.Array:
    if isinstance(values, np.ndarray) and values.ndim == 2:
        flat = pa.array(np.ascontiguousarray(values).reshape(-1))
        return pa.FixedSizeListArray.from_arrays(flat, values.shape[1])
    if isinstance(values, np.ndarray) and values.dtype == object:
        return pa.array(values.tolist())
    return values if isinstance(values, pa.Array) else pa.array(values, from_pandas=True)  # NaN -> null


class EpochTable:
    """Read-only queries over one epoch table; safe to share between threads.

    It holds the file open, so every query reads the file it was opened on (a rewritten table is read by a new
    ``EpochTable``; the viewer keys its tables by the file's size and time).
    ``roles``: ``{'scores': [...], 'higher_is_better': {...}, 'meta': [...], 'summaries': [...]}``.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        fd = open_table_file(path)
        self._connection = duckdb.connect(config={"memory_limit": MEMORY_LIMIT, "threads": THREADS})
        weakref.finalize(self, _close, self._connection, fd)
        self._source = fd_path(fd)  # DuckDB reads the file opened here, by a name it takes literally
        self._connection.execute("SET enable_progress_bar = false")
        self._connection.execute("SET parquet_metadata_cache = true")  # the footer is parsed once, not per query
        self._lock = threading.Lock()
        schema = read_checked_schema(fd, path)
        self._types = {field.name: field.type for field in schema}
        self.roles, self.unknown_roles = _read_roles(schema, path)

    def columns(self) -> list[tuple[str, str]]:
        """``(name, type)`` of every scalar column (the ones a table shows, filters and sorts)."""
        return [(name, _type_name(kind)) for name, kind in self._types.items() if not _is_list(kind)]

    def arrow_types(self) -> dict[str, pa.DataType]:
        """Every column's Arrow type, list columns included."""
        return dict(self._types)

    def has_column(self, name: str) -> bool:
        """Whether the table has ``name``, list columns (``probabilities``) included."""
        return name in self._types

    def count(self, where: Filter | None = None) -> int:
        condition, params = self._where(where)
        return int(self._query(f"SELECT count(*) FROM read_parquet($path){condition}", params)[0][0])

    def page(self, where: Filter | None = None, order_by: str | None = None, descending: bool = True,
             offset: int = 0, limit: int = 100) -> list[dict[str, Any]]:
        """Rows ``offset .. offset+limit`` of the filtered, sorted table (NaN given as None).

        Sorting reads only the filter and sort columns and returns row positions; the page's full rows are
        then read by position, which DuckDB narrows to the row groups (min/max of the row number) that hold
        them.
        """
        condition, params = self._where(where)
        order = "idx"
        if order_by is not None:
            order = f"{self._column(order_by)} {'DESC' if descending else 'ASC'} NULLS LAST, idx"
        offset, limit = _non_negative_int("offset", offset), _non_negative_int("limit", limit)
        chosen = self._query(f"SELECT file_row_number FROM read_parquet($path, file_row_number = true){condition} "
                             f"ORDER BY {order} LIMIT {limit} OFFSET {offset}", params)
        wanted = [row[0] for row in chosen]
        if not wanted:
            return []
        names = [name for name, _ in self.columns()]
        selected = ", ".join(_quote(name) for name in names)
        rows = self._query(f"SELECT file_row_number, {selected} FROM read_parquet($path, file_row_number = true) "
                           "WHERE file_row_number IN (SELECT UNNEST($wanted))", {"wanted": wanted})
        by_position = {row[0]: row[1:] for row in rows}
        return [{name: _json_safe(value) for name, value in zip(names, by_position[i])} for i in wanted]

    def percentile(self, column: str, value: float) -> float | None:
        """Percentage of the column's non-null values that are at most ``value`` (None if it has none)."""
        name = self._column(column)
        below, total = self._query(f"SELECT count(*) FILTER (WHERE {name} <= $value), count({name}) "
                                   "FROM read_parquet($path)", {"value": value})[0]
        return 100.0 * below / total if total else None

    def values(self, columns: Sequence[str], where: Filter | None = None) -> dict[str, np.ndarray]:
        """Whole columns as NumPy arrays, in idx order (for the analysis, which needs every row of a few)."""
        condition, params = self._where(where)
        selected = ", ".join(self._column(name, scalar_only=False) for name in columns)
        table = self._arrow(f"SELECT {selected} FROM read_parquet($path){condition} ORDER BY idx", params)
        return {name: _numpy_column(table.column(i)) for i, name in enumerate(columns)}

    def arrays(self, columns: Sequence[str]) -> dict[str, np.ndarray]:
        """Whole columns as NumPy arrays in idx order, read straight from the file one column at a time: no query
        and no copy of the whole table, so the analysis holds a million rows of every column at little more than
        their own size (``values`` sorts them in DuckDB first, which takes several times that)."""
        for name in columns:
            self._column(name, scalar_only=False)
        try:
            file = pq.ParquetFile(self._source)
            idx = file.read(columns=["idx"]).column(0).to_numpy()
            order = None if bool(np.all(idx[1:] > idx[:-1])) else np.argsort(idx, kind="stable")
            arrays = {}
            for name in columns:
                column = idx if name == "idx" else _owned_column(file.read(columns=[name]).column(0))
                arrays[name] = column if order is None else column[order]
                pa.default_memory_pool().release_unused()  # the column's decoded pages, back to the system
        except (OSError, pa.ArrowException) as exc:
            raise EpochTableFileError(f"{self.path} cannot be read ({exc}); validate the epoch again to rewrite "
                                      "it") from exc
        return arrays

    def class_count(self) -> int | None:
        """How many classes the ``probabilities`` lists cover (the longest list); None without them."""
        kind = self._types.get("probabilities")
        if kind is None:
            return None
        if pa.types.is_fixed_size_list(kind):
            return kind.list_size
        longest = self._query("SELECT max(len(probabilities)) FROM read_parquet($path)", {})[0][0]
        return None if longest is None else int(longest)

    def label_confidence(self) -> dict[str, np.ndarray] | None:
        """Per row, in idx order: ``idx``, ``confidence`` (the probability of its label; NaN for a label that is no
        class) and ``correct`` (prediction = label), reading one number of each probability list; None for a table
        without labels, predictions and probabilities."""
        if not all(name in self._types for name in ("label", "prediction", "probabilities")):
            return None
        table = self._arrow("SELECT idx, CASE WHEN label >= 0 THEN list_extract(probabilities, TRY_CAST(label AS "
                            "BIGINT) + 1) END AS confidence, coalesce(prediction = label, false) AS correct "
                            "FROM read_parquet($path) ORDER BY idx", {})
        return {"idx": table.column(0).to_numpy(), "confidence": _numpy_column(table.column(1)).astype(np.float64),
                "correct": table.column(2).to_numpy(zero_copy_only=False).astype(bool)}

    # ----------------------------------------------------------------- SQL glue
    def _column(self, name: Any, scalar_only: bool = True) -> str:
        """The quoted identifier of a column this table has; anything else is refused."""
        kind = self._types.get(name) if isinstance(name, str) else None
        if kind is None or (scalar_only and _is_list(kind)):
            known = ", ".join(n for n, _ in self.columns())
            raise EpochTableError(f"the epoch table has no column {name!r}; its columns are: {known}")
        return _quote(name)

    def _where(self, where: Filter | None) -> tuple[str, dict[str, Any]]:
        if not where:
            return "", {}
        clauses, params = [], {}
        for i, condition in enumerate(where):
            if not isinstance(condition, (list, tuple)) or len(condition) not in (2, 3):
                raise EpochTableError(f"filter {condition!r} must be a (column, op, value) triple, "
                                      f"e.g. ('accuracy', '=', 0)")
            column, op = self._column(condition[0]), condition[1]
            if op not in OPERATORS:
                raise EpochTableError(f"filter operator {op!r} is not one of {sorted(OPERATORS)}")
            if op in ("is null", "is not null"):
                clauses.append(f"{column} {OPERATORS[op]}")
                continue
            if op == "differs from" and len(condition) == 3:  # a value, and another value or none
                clauses.append(f"({column} IS NOT NULL AND {column} IS DISTINCT FROM {self._column(condition[2])})")
                continue
            if len(condition) != 3:
                raise EpochTableError(f"filter {condition!r} needs a value for {op!r}")
            value = condition[2]
            if op in ("in", "not in"):
                if not isinstance(value, (list, tuple, np.ndarray)):
                    raise EpochTableError(f"filter {condition!r}: '{op}' needs a list of values")
                clauses.append(f"{column} {OPERATORS[op]} (SELECT UNNEST($v{i}))")
                value = np.asarray(value).tolist()
            else:
                clauses.append(f"{column} {OPERATORS[op]} $v{i}")
                value = value.item() if isinstance(value, np.generic) else value
            params[f"v{i}"] = value
        return " WHERE " + " AND ".join(clauses), params

    def _query(self, sql: str, params: dict[str, Any]) -> list[tuple]:
        return self._run(lambda cursor: cursor.execute(sql, {"path": self._source, **params}).fetchall())

    def _arrow(self, sql: str, params: dict[str, Any]) -> pa.Table:
        return self._run(lambda cursor: cursor.sql(sql, params={"path": self._source, **params}).to_arrow_table())

    def _run(self, fetch: Callable[[duckdb.DuckDBPyConnection], Any]) -> Any:
        """``fetch`` on a cursor of its own: DuckDB cursors are not shared between threads."""
        with self._lock:
            cursor = self._connection.cursor()
        try:
            return fetch(cursor)
        except duckdb.Error as exc:
            raise EpochTableError(f"query on {self.path} failed ({type(exc).__name__}: {exc}); check the filter "
                                  "values' types, or validate the epoch again if the file is damaged") from exc
        finally:
            cursor.close()


def _close(connection: duckdb.DuckDBPyConnection, fd: int) -> None:
    """The connection first: it reads the file through ``fd``'s name."""
    connection.close()
    os.close(fd)


def _read_roles(schema: pa.Schema, path: str) -> tuple[dict[str, Any], list[str]]:
    """The column roles written with the table ({} for a table written without them), checked: every reader
    (viewer, analysis, export) uses them as lists of column names and maps of a name to a bool or a string; and the
    keys that are no role Lantern writes (the analysis refuses a table with those, the viewer's table ignores them)."""
    try:
        roles = json.loads((schema.metadata or {}).get(ROLES_KEY, b"{}"))
    except (ValueError, RecursionError) as exc:
        raise EpochTableFileError(f"{path} has damaged metadata ({exc}); validate the epoch again") from None
    roles = roles if isinstance(roles, dict) else {}
    bad = [key for key in ROLE_LISTS if not isinstance(roles.get(key, []), list)
           or not all(isinstance(name, str) for name in roles.get(key, []))]
    bad += [key for key, kind in ROLE_MAPS.items() if not isinstance(roles.get(key, {}), dict)
            or not all(type(value) is kind for value in roles.get(key, {}).values())]
    if bad:
        raise EpochTableFileError(f"{path} has malformed column roles (metadata {ROLES_KEY.decode()}: "
                                  f"{', '.join(bad)} is not what Lantern writes); it was damaged "
                                  "or written by another tool: validate the epoch again to rewrite it")
    known = (*ROLE_LISTS, *ROLE_MAPS, FAILURE_DEFINITION_ROLE)
    kept = {key: roles[key] for key in (*ROLE_LISTS, *ROLE_MAPS) if key in roles}
    failure = roles.get(FAILURE_DEFINITION_ROLE)
    if isinstance(failure, dict) and isinstance(failure.get("metric"), str) \
            and _is_share(failure.get("worst_fraction")):
        kept[FAILURE_DEFINITION_ROLE] = failure  # anything else is not what Lantern writes: the default applies
    return kept, sorted(str(key) for key in roles if key not in known)


def _is_share(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1


def _is_list(kind: pa.DataType) -> bool:
    return pa.types.is_list(kind) or pa.types.is_fixed_size_list(kind) or pa.types.is_large_list(kind)


def _type_name(kind: pa.DataType) -> str:
    """'integer', 'float', 'boolean' or 'string' (else Arrow's own name): what a table needs to format it."""
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    for name, test in (("boolean", pa.types.is_boolean), ("integer", pa.types.is_integer),
                       ("float", pa.types.is_floating), ("string", pa.types.is_string)):
        if test(kind):
            return name
    return str(kind)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _non_negative_int(what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise EpochTableError(f"{what} must be a non-negative int, got {value!r}")
    return int(value)


def _json_safe(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


def _numpy_column(column: pa.ChunkedArray) -> np.ndarray:
    if _is_list(column.type):
        flat = column.combine_chunks()
        width = column.type.list_size if pa.types.is_fixed_size_list(column.type) else None
        if width is None:
            lengths = np.unique(pc.list_value_length(flat).fill_null(-1).to_numpy())
            if len(lengths) > 1 or (len(lengths) and lengths[0] < 0):
                raise EpochTableError(f"list column of type {column.type} holds lists of different lengths or missing "
                                      "lists, where one list of the same length per datapoint is expected")
            width = int(lengths[0]) if len(lengths) else 0
        values = flat.flatten().to_numpy(zero_copy_only=False)
        return values.reshape(len(flat), width)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return _strings(column)
    return column.to_numpy()


def _owned_column(column: pa.ChunkedArray) -> np.ndarray:
    """``_numpy_column`` as an array that owns its memory, filled chunk by chunk: Arrow's decoded pages can go back
    to the system at once, and a list column never exists twice (combined chunks and their copy)."""
    if pa.types.is_fixed_size_list(column.type) and column.null_count == 0:
        width = column.type.list_size
        owned = np.empty((len(column), width), dtype=column.type.value_type.to_pandas_dtype())
        start = 0
        for chunk in column.chunks:
            owned[start:start + len(chunk)] = chunk.flatten().to_numpy(zero_copy_only=False).reshape(-1, width)
            start += len(chunk)
        return owned
    values = _numpy_column(column)
    return values if values.flags.owndata else values.copy()


def _strings(column: pa.ChunkedArray) -> np.ndarray:
    """An object array in which equal strings are one Python object (a million rows of a few categories take 8 MB
    of pointers, not 60 MB of strings); None where null."""
    encoded = column.dictionary_encode().combine_chunks()
    names = np.array(encoded.dictionary.to_pylist() + [None], dtype=object)
    codes = encoded.indices.fill_null(len(names) - 1).to_numpy()
    return names[codes]
