"""The epoch table file and its queries, checked against NumPy on the same columns."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis import epoch_table
from analysis.epoch_table import EpochTable, EpochTableError, write_epoch_table

ROWS = 1000


@pytest.fixture
def columns():
    rng = np.random.default_rng(0)
    loss = rng.exponential(size=ROWS)
    loss[::50] = np.nan
    return {
        "idx": np.arange(ROWS),
        "shape": np.array(["circle", "square", "ring", "it's"], dtype=object)[rng.integers(0, 4, ROWS)],
        "occluded": rng.random(ROWS) < 0.3,
        "cross_entropy": loss,
        "layer3.sparsity": rng.random(ROWS),
        "probabilities": rng.dirichlet(np.ones(4), size=ROWS).astype(np.float32),
    }


@pytest.fixture
def table(tmp_path, columns):
    path = str(tmp_path / "epoch_table.parquet")
    write_epoch_table(path, columns)
    return EpochTable(path)


def test_columns_list_the_scalar_columns_with_their_types(table):
    assert table.columns() == [("idx", "integer"), ("shape", "string"), ("occluded", "boolean"),
                               ("cross_entropy", "float"), ("layer3.sparsity", "float")]


def test_count_page_and_percentile_agree_with_numpy(table, columns):
    keep = columns["occluded"] & (columns["layer3.sparsity"] > 0.2) & np.isin(columns["shape"], ["ring", "it's"])
    where = [("occluded", "=", True), ("layer3.sparsity", ">", 0.2), ("shape", "in", ["ring", "it's"])]
    assert table.count(where) == keep.sum() > 20

    loss = np.where(np.isnan(columns["cross_entropy"]), -np.inf, columns["cross_entropy"])
    order = [i for i in np.lexsort((columns["idx"], -loss)) if keep[i]]  # descending, NaN last, ties by idx
    page = table.page(where, order_by="cross_entropy", descending=True, offset=5, limit=10)
    assert [row["idx"] for row in page] == order[5:15]
    row = page[0]
    assert row["shape"] == columns["shape"][row["idx"]] and row["occluded"] is True
    assert row["layer3.sparsity"] == pytest.approx(columns["layer3.sparsity"][row["idx"]])
    assert "probabilities" not in row

    nan_rows = table.page([("idx", "<", 100)], order_by="cross_entropy", descending=False, limit=100)
    assert [r["cross_entropy"] for r in nan_rows[-2:]] == [None, None]  # NaN sorts last and reads as None

    finite = columns["cross_entropy"][~np.isnan(columns["cross_entropy"])]
    assert table.percentile("cross_entropy", 1.0) == pytest.approx(100 * np.mean(finite <= 1.0))


def test_a_page_spread_over_many_row_groups_has_each_rows_own_values(tmp_path, columns, monkeypatch):
    """A page's rows are fetched by position from the row groups that hold them (here 32 rows a group)."""
    monkeypatch.setattr(epoch_table, "ROW_GROUP_SIZE", 32)
    path = str(tmp_path / "epoch_table.parquet")
    sparse = {name: values[::2] for name, values in columns.items()}  # idx 0, 2, 4, ...: idx is not position
    write_epoch_table(path, sparse)
    table = EpochTable(path)
    assert pq.read_metadata(path).num_row_groups == 16
    order = np.argsort(-sparse["layer3.sparsity"], kind="stable")
    page = table.page(order_by="layer3.sparsity", descending=True, offset=7, limit=60)
    assert [row["idx"] for row in page] == sparse["idx"][order[7:67]].tolist()
    for row in page:
        position = row["idx"] // 2
        assert row["shape"] == sparse["shape"][position] and row["occluded"] == sparse["occluded"][position]
        assert row["layer3.sparsity"] == sparse["layer3.sparsity"][position]


def test_values_reads_whole_columns_in_idx_order(table, columns):
    values = table.values(["probabilities", "shape"], where=[("occluded", "=", False)])
    np.testing.assert_allclose(values["probabilities"], columns["probabilities"][~columns["occluded"]])
    assert list(values["shape"]) == list(columns["shape"][~columns["occluded"]])


def test_filters_name_only_existing_columns_and_bind_their_values(table):
    with pytest.raises(EpochTableError, match="no column 'idx; DROP TABLE x'.*cross_entropy"):
        table.count([("idx; DROP TABLE x", "=", 1)])
    with pytest.raises(EpochTableError, match="no column 'probabilities'"):
        table.page(order_by="probabilities")
    with pytest.raises(EpochTableError, match="operator 'LIKE' is not one of"):
        table.count([("shape", "LIKE", "%")])
    with pytest.raises(EpochTableError, match="needs a list"):
        table.count([("shape", "in", "ring")])
    with pytest.raises(EpochTableError, match="offset must be a non-negative int"):
        table.page(offset="0; DROP")
    assert table.count([("shape", "=", "x' OR '1'='1")]) == 0  # a value is a value, never SQL
    assert table.count([("shape", "=", "it's")]) > 0


def test_a_missing_or_damaged_file_is_explained(tmp_path):
    with pytest.raises(EpochTableError, match="no epoch table"):
        EpochTable(str(tmp_path / "absent.parquet"))
    damaged = tmp_path / "epoch_table.parquet"
    damaged.write_bytes(b"PAR1 not really parquet")
    with pytest.raises(EpochTableError, match="not a readable Parquet file"):
        EpochTable(str(damaged))


def test_rewriting_replaces_the_file_whole_and_leaves_no_temporary(tmp_path, columns):
    path = str(tmp_path / "epoch_table.parquet")
    write_epoch_table(path, columns)
    write_epoch_table(path, {name: values[:10] for name, values in columns.items()})
    assert EpochTable(path).count() == 10
    assert os.listdir(tmp_path) == ["epoch_table.parquet"]


def write_bomb(path: str, rows: int) -> None:
    """A decompression bomb: ``rows`` constant rows, a few KB with zstd and dictionaries (not a Lantern table)."""
    zeros = pa.array(np.zeros(rows, np.int64))
    pq.write_table(pa.table({"idx": zeros, "accuracy": zeros.cast(pa.float64())}), path, compression="zstd",
                   row_group_size=rows)


def test_a_table_claiming_more_rows_than_its_bytes_hold_is_refused_before_any_query(tmp_path):
    bomb = str(tmp_path / "epoch_table.parquet")
    write_bomb(bomb, 2_000_000)
    assert os.path.getsize(bomb) < 100_000
    with pytest.raises(EpochTableError, match="claims 2000000 rows.*not a file Lantern writes"):
        EpochTable(bomb)
    sparse = str(tmp_path / "sparse.parquet")  # Lantern's sparsest table: every other column null
    write_epoch_table(sparse, {"idx": np.arange(20_000), **{f"s{i}": np.full(20_000, np.nan) for i in range(100)}})
    table = EpochTable(sparse)
    assert table.count() == 20_000
    settings = table._connection.execute("SELECT current_setting('memory_limit'), current_setting('threads')")
    limit, threads = settings.fetchone()
    assert limit.endswith("GiB") and float(limit.split()[0]) < 4 and threads <= 4


def test_glob_characters_in_the_path_read_that_file_alone(tmp_path, columns):
    for run, rows in (("*", 10), ("other", 20)):
        os.mkdir(tmp_path / run)
        write_epoch_table(str(tmp_path / run / "epoch_table.parquet"),
                          {name: values[:rows] for name, values in columns.items()})
    table = EpochTable(str(tmp_path / "*" / "epoch_table.parquet"))
    assert table.count() == 10 and len(table.values(["idx"])["idx"]) == 10
    assert len(table.page(limit=100)) == 10 and table.percentile("layer3.sparsity", 2.0) == 100.0


def test_a_symlinked_or_fifo_table_is_refused_without_blocking(tmp_path, columns):
    outside = tmp_path / "outside.parquet"
    write_epoch_table(str(outside), columns)
    os.symlink(outside, tmp_path / "epoch_table.parquet")
    with pytest.raises(EpochTableError, match="symlink"):
        EpochTable(str(tmp_path / "epoch_table.parquet"))
    os.mkfifo(tmp_path / "fifo.parquet")
    with pytest.raises(EpochTableError, match="not a regular file"):
        EpochTable(str(tmp_path / "fifo.parquet"))


@pytest.mark.parametrize("roles", [{"scores": 5, "higher_is_better": ["accuracy"]}, {"scores": [["a"]]},
                                   {"higher_is_better": {"loss": "no"}}, {"summaries": "layer3.sparsity"}])
def test_malformed_column_roles_are_an_epoch_table_error_naming_the_file(tmp_path, columns, roles):
    """The roles are used as lists of names and a {name: bool} direction by the viewer, analysis and export:
    anything else is refused where they are read, not a TypeError later in one of them."""
    path = str(tmp_path / "epoch_table.parquet")
    write_epoch_table(path, columns, roles)
    with pytest.raises(EpochTableError, match=f"{path} has malformed column roles.*validate the epoch again"):
        EpochTable(path)
