"""The epoch table's file (``epoch_table.parquet``) opened safely, before any query reads it.

A reader opens it once, as a regular file (never a FIFO or a symlink), and DuckDB reads that open file by a name
of its own (``fd_path``: ``/proc/self/fd/N``), so glob characters in a run's path never widen a query to other
files. A table that claims more rows or values than its bytes can hold (a decompression bomb: 2e8 constant rows
in 4 MB) is refused before any query (``read_checked_schema``). The queries are ``analysis.epoch_table``'s.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq

from run_dir.errors import EpochTableFileError
from run_dir.run_files import open_regular

# Every row holds a distinct idx (Lantern's tables spend about 4 bytes a row on it) and Lantern's sparsest
# column (all null) still takes about 1/200 byte a value: a file claiming more is not one Lantern wrote.
MIN_BYTES_PER_ROW = 1
MAX_VALUES_PER_BYTE = 1024


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
    try:
        with open(fd, "rb", closefd=False) as file:
            parquet = pq.ParquetFile(file)
            metadata, schema = parquet.metadata, parquet.schema_arrow
    except (OSError, pa.ArrowException) as exc:
        raise EpochTableFileError(f"{path} is not a readable Parquet file ({exc}); validate the epoch again "
                                  "to rewrite it") from exc
    size = os.fstat(fd).st_size
    rows, values = _claimed_rows(metadata), _claimed_values(metadata, schema)
    if rows is None or rows != metadata.num_rows or rows * MIN_BYTES_PER_ROW > size or \
            values > size * MAX_VALUES_PER_BYTE:
        raise EpochTableFileError(f"{path} claims {metadata.num_rows} rows (its row groups: {rows}) and {values} "
                                  f"values in {size} bytes, more than a table Lantern writes can hold: it is "
                                  "damaged or not a file Lantern writes; remove it and validate the epoch again")
    return schema


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
