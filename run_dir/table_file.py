"""The epoch table's file (``epoch_table.parquet``) opened safely, before any query reads it.

A reader opens it once, as a regular file (never a FIFO or a symlink), and DuckDB reads that open file by a name
of its own (``fd_path``: ``/proc/self/fd/N``), so glob characters in a run's path never widen a query to other
files. A table that claims more rows or values than its bytes can hold (a decompression bomb: 2e8 constant rows
in 4 MB) is refused before any query (``read_checked_schema``), and so is one whose cells are larger in bytes than
a table holds: a 0.1 MB file of 600 identical 4 MB strings decodes to 2.4 GB (a 100-row page of the viewer's table
answered 400 MB). Every column's bytes are bounded as stored (the footer's uncompressed sizes, before any read) and
as decoded (a string column's dictionary read alone: its longest value, and the bytes its rows expand to). The
queries are ``analysis.epoch_table``'s.
"""

from __future__ import annotations

import os
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from run_dir.errors import EpochTableFileError
from run_dir.run_files import open_regular

# Every row holds a distinct idx (Lantern's tables spend about 4 bytes a row on it) and Lantern's sparsest
# column (all null) still takes about 1/200 byte a value: a file claiming more is not one Lantern wrote.
MIN_BYTES_PER_ROW = 1
MAX_VALUES_PER_BYTE = 1024
# Meta strings are names, categories and paths: a cell of more is no meta info but a crafted or damaged value.
MAX_TEXT_BYTES = 64 * 1024
# A column's bytes, stored uncompressed or decoded, per byte of the file (Lantern's tables compress a few times),
# and at least this many: what a reader may hold of one column.
MAX_COLUMN_BYTES_PER_BYTE = 1024
MIN_COLUMN_BYTES_BOUND = 64 * 1024 * 1024


def open_table_file(path: str) -> int:
    """A read-only fd of the table, refused unless it is a regular file inside the run (no FIFO, no symlink)."""
    try:
        return open_regular(path, "epoch table", EpochTableFileError)
    except FileNotFoundError:
        raise EpochTableFileError(f"no epoch table at {path}: the epoch has not finished validating, or the run "
                                  "predates epoch tables (validate it again to write one)") from None
    except OSError as exc:
        raise EpochTableFileError(f"epoch table {path} cannot be opened ({exc.strerror or exc}); check that it is "
                                  "readable, or validate the epoch again to rewrite it") from None


def fd_path(fd: int) -> str:
    """A name of the open file ``fd`` with no glob characters, which reaches no other file."""
    return f"/proc/self/fd/{fd}" if os.path.isdir("/proc/self/fd") else f"/dev/fd/{fd}"


def read_checked_schema(fd: int, path: str) -> pa.Schema:
    """The table's schema, once its footer shows no more rows and values than its bytes can hold."""
    size = os.fstat(fd).st_size
    try:
        with open(fd, "rb", closefd=False) as file:
            parquet = pq.ParquetFile(file)
            metadata, schema = parquet.metadata, parquet.schema_arrow
            rows, values = _claimed_rows(metadata), _claimed_values(metadata, schema)
            if rows is None or rows != metadata.num_rows or rows * MIN_BYTES_PER_ROW > size or \
                    values > size * MAX_VALUES_PER_BYTE:
                raise EpochTableFileError(
                    f"{path} claims {metadata.num_rows} rows (its row groups: {rows}) and {values} values in {size} "
                    "bytes, more than a table Lantern writes can hold: it is damaged or not a file Lantern writes; "
                    "remove it and validate the epoch again")
            bound = max(MIN_COLUMN_BYTES_BOUND, size * MAX_COLUMN_BYTES_PER_BYTE)
            _check_stored_bytes(metadata, schema, bound, path)
            _check_text_bytes(file, schema, bound, path)
    except (OSError, pa.ArrowException) as exc:
        raise EpochTableFileError(f"{path} is not a readable Parquet file ({exc}); validate the epoch again "
                                  "to rewrite it") from exc
    return schema


def _check_stored_bytes(metadata: pq.FileMetaData, schema: pa.Schema, bound: int, path: str) -> None:
    """``EpochTableFileError`` naming the first column whose chunks hold more than ``bound`` bytes uncompressed
    (what decompressing it takes, before any value is decoded)."""
    stored = dict.fromkeys(schema.names, 0)
    for i in range(metadata.num_row_groups):
        for j in range(metadata.num_columns):
            chunk = metadata.row_group(i).column(j)
            name = _field_of(chunk.path_in_schema, schema.names)
            stored[name] = stored.get(name, 0) + max(0, chunk.total_uncompressed_size)
    for name, total in stored.items():
        if total > bound:
            raise _too_large(path, name, f"{total} bytes uncompressed", bound)


def _check_text_bytes(file: BinaryIO, schema: pa.Schema, bound: int, path: str) -> None:
    """``EpochTableFileError`` naming the first string or binary column with a value over ``MAX_TEXT_BYTES`` or
    whose rows decode to more than ``bound`` bytes. Read as dictionaries, one row group at a time: each distinct
    value once and an index per row, so a column of one huge value repeated costs that value, not its copies."""
    names = [field.name for field in schema if _is_text(field.type)]
    if not names:
        return
    parquet = pq.ParquetFile(file, read_dictionary=names)
    for name in names:
        decoded = 0
        for group in range(parquet.num_row_groups):
            for chunk in parquet.read_row_group(group, columns=[name]).column(0).chunks:
                lengths = pc.binary_length(chunk.dictionary) if pa.types.is_dictionary(chunk.type) else None
                if lengths is None:  # a dictionary of another kind than read_dictionary gives: its values
                    lengths, chunk = pc.binary_length(chunk), None
                longest = pc.max(lengths).as_py() or 0
                if longest > MAX_TEXT_BYTES:
                    raise _too_large(path, name, f"a value of {longest} bytes", MAX_TEXT_BYTES, "a value")
                decoded += pc.sum(lengths if chunk is None else pc.take(lengths, chunk.indices)).as_py() or 0
        if decoded > bound:
            raise _too_large(path, name, f"{decoded} bytes of text", bound)


def _too_large(path: str, name: str, holds: str, bound: int, what: str = "a column") -> EpochTableFileError:
    return EpochTableFileError(f"{path}: column {name!r} holds {holds}, more than {what} of an epoch table may "
                               f"({bound} bytes): it is damaged or not a table Lantern writes; shorten or drop that "
                               "column, or remove the file and validate the epoch again")


def _field_of(column_path: str, names: list[str]) -> str:
    """The top-level column a column chunk (``path_in_schema``: ``probabilities.list.element``) belongs to: its
    own name, else the longest name it starts with (a name may hold dots: ``label.mask``)."""
    if column_path in names:
        return column_path
    owners = [name for name in names if column_path.startswith(name + ".")]
    return max(owners, key=len) if owners else column_path


def _is_text(kind: pa.DataType) -> bool:
    kind = kind.value_type if pa.types.is_dictionary(kind) else kind
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) or \
        pa.types.is_large_binary(kind)


def _claimed_rows(metadata: pq.FileMetaData) -> int | None:
    """Rows the row groups hold (what a query reads); None where one claims a negative count."""
    counts = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
    return None if any(count < 0 for count in counts) else sum(counts)


def _claimed_values(metadata: pq.FileMetaData, schema: pa.Schema) -> int:
    """Values a query of every column decodes: the column chunks' own counts, and at least a row's width (a
    fixed-size list counts its size) times the rows."""
    chunks = sum(max(0, metadata.row_group(i).column(j).num_values)
                 for i in range(metadata.num_row_groups) for j in range(metadata.num_columns))
    width = sum(field.type.list_size if pa.types.is_fixed_size_list(field.type) else 1 for field in schema)
    return max(chunks, metadata.num_rows * width)
